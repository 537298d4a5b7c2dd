package etcd_test

import (
	"testing"

	"github.com/leasestore/leasestore/kvstore/etcd"
)

// TestDSNInsecureSkipFalseKeepsPlainText: etcdctl's
// --insecure-skip-tls-verify=false is its default, and docs/etcd.md lists
// only cacert and cert/key as implying TLS. An etcd:// DSN that spells the
// default out must still connect in plain text, not switch to TLS (which
// a plain-text cluster then fails as unreachable).
func TestDSNInsecureSkipFalseKeepsPlainText(t *testing.T) {
	t.Parallel()
	cfg, err := etcd.ParseDSN("etcd://127.0.0.1:2379/p?insecure-skip-tls-verify=false")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS != nil || cfg.Endpoints[0] != "http://127.0.0.1:2379" {
		t.Fatalf("etcd://...?insecure-skip-tls-verify=false parsed to endpoints %v with TLS %v; want plain text (http://), as without the parameter",
			cfg.Endpoints, cfg.TLS != nil)
	}
}
