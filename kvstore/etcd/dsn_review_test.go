package etcd_test

import (
	"strings"
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

// TestDSNErrorNeverRepeatsPartOfThePassword: ParseDSN's errors never
// repeat the password (its doc; DESIGN: "A DSN's password never appears in
// any output or log"). A password holding a '/' and then a '?' that the
// user did not percent-encode is cut at the '?': its tail is read as the
// DSN's parameters, and the error for an unknown parameter (or a bad
// value) quotes that tail, the end of the password. leasectl prints it
// as is (`leasectl get k --dsn 'etcd://u:pa/ss?s3cretword@h:2379/pre'`
// says `unknown parameter "s3cretword@h:2379/pre"`), while etcd.Redact of
// the same DSN masks it.
func TestDSNErrorNeverRepeatsPartOfThePassword(t *testing.T) {
	t.Parallel()
	const secret = "s3cretword"
	for _, dsn := range []string{
		"etcd://u:pa/ss?" + secret + "@127.0.0.1:2379/pre",
		"etcd://u:pa/ss?" + secret + "=1@127.0.0.1:2379/pre",
		"etcd://u:pa/ss?dial-timeout=" + secret + "@127.0.0.1:2379/pre",
	} {
		_, err := etcd.ParseDSN(dsn)
		if err == nil {
			t.Errorf("ParseDSN(%s): accepted a DSN whose password holds an unencoded '/' and '?'", etcd.Redact(dsn))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseDSN(%s): the error repeats the end of the password (%q): %v", etcd.Redact(dsn), secret, err)
		}
	}
}
