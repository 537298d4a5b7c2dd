package contract

import (
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// TestEnvNamespacesDiffer: every env works in a namespace of its own, so
// that stores sharing one PostgreSQL database (whose key locks are the
// database's) never meet on a key name.
func TestEnvNamespacesDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		ns := newNamespace()
		if err := (protocol.Key{Namespace: ns, Name: "k"}).Validate(); err != nil {
			t.Fatalf("namespace %q is not valid: %v", ns, err)
		}
		if seen[ns] {
			t.Fatalf("namespace %q handed out twice", ns)
		}
		seen[ns] = true
	}
}
