package protocol_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// A namespace default whose glob is empty names no namespace: it never
// applies. `leasectl serve --lock-delay '=15s'` refuses it ("names no
// namespace: write a glob before the ="), and docs/http-api.md gives the
// glob one grammar wherever one is written, the Go API's
// Config.LockDelays included; NamespaceLockDelay.Validate (and so
// protocol.New) accepted it, so that NamespaceLockDelay{Delay: 15 * time.Second},
// read as "every namespace", quietly gave no lease a lock-delay.
func TestNamespaceLockDelayRefusesAnEmptyGlob(t *testing.T) {
	d := protocol.NamespaceLockDelay{Delay: 15 * time.Second}
	if err := d.Validate(); err == nil {
		t.Fatalf("NamespaceLockDelay{Namespaces: \"\", Delay: 15s}.Validate() = nil; want an error naming the empty glob and the fix (\"*\" for every namespace)")
	}
}
