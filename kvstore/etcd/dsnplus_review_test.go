package etcd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/testca"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// TestDSNFileParameterKeepsAPlus: docs/etcd.md gives cacert=FILE as
// etcdctl's --cacert, and asks only that an '@' in a parameter be written
// %40. A CA bundle whose file name holds a '+' (a common character in
// generated names: "ca+intermediate.pem") written as the operator would
// give it to etcdctl must name that file. ParseDSN reads its parameters
// as an HTML form (url.ParseQuery), where '+' is a blank, and looks for
// another file.
func TestDSNFileParameterKeepsAPlus(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "plus")
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca+intermediate.pem")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := etcd.ParseDSN("etcds://127.0.0.1:2379/p?cacert=" + file)
	if err != nil {
		t.Fatalf("etcds://127.0.0.1:2379/p?cacert=%s: %v; want the CA bundle %s read, as etcdctl --cacert=%s reads it", file, err, file, file)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil {
		t.Fatalf("cacert=%s gave no root CAs", file)
	}
}
