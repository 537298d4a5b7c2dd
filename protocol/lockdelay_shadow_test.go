package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// The first glob of Config.LockDelays that matches a namespace applies, so
// an entry after one that matches every namespace it does never applies:
// `leasectl serve --lock-delay '*=15s' --lock-delay 'jobs-*=1s'` refuses
// it, and the Go API must too (New panics on a bad entry, as on a
// malformed glob), not quietly give jobs-* leases 15s.
func TestNewRefusesALockDelayAnEarlierGlobShadows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		delays []protocol.NamespaceLockDelay
		want   string
	}{
		{"star before jobs-*", []protocol.NamespaceLockDelay{{Namespaces: "*", Delay: 15 * time.Second}, {Namespaces: "jobs-*", Delay: time.Second}}, "jobs-*"},
		{"jobs-* before jobs-1", []protocol.NamespaceLockDelay{{Namespaces: "jobs-*", Delay: 15 * time.Second}, {Namespaces: "jobs-1", Delay: time.Second}}, "jobs-1"},
		{"a glob given twice", []protocol.NamespaceLockDelay{{Namespaces: "billing", Delay: 0}, {Namespaces: "billing", Delay: time.Second}}, "billing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg = fmt.Sprint(r)
					}
				}()
				protocol.New(memstore.New(nil), &protocol.Config{LockDelays: c.delays}).Close(t.Context())
				return ""
			}()
			if msg == "" || !strings.Contains(msg, c.want) {
				t.Fatalf("New with LockDelays %v: panic %q; want it refused, naming %s, which can never apply", c.delays, msg, c.want)
			}
		})
	}
	// In the right order each applies.
	protocol.New(memstore.New(nil), &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{
		{Namespaces: "jobs-1", Delay: time.Second}, {Namespaces: "jobs-*", Delay: 15 * time.Second}, {Namespaces: "*", Delay: time.Second}}}).Close(t.Context())
}

// ValidateLockDelays tells what New would panic on, as an error naming the
// entry, and takes a list whose every entry can apply.
func TestValidateLockDelaysNamesTheEntryThatCanNeverApply(t *testing.T) {
	t.Parallel()
	err := protocol.ValidateLockDelays([]protocol.NamespaceLockDelay{{Namespaces: "*", Delay: time.Second}, {Namespaces: "jobs-*", Delay: time.Second}})
	if err == nil || !strings.Contains(err.Error(), `"jobs-*"`) || !strings.Contains(err.Error(), "first") {
		t.Fatalf("ValidateLockDelays(*, jobs-*) = %v; want an error naming jobs-* and the fix (give it first)", err)
	}
	if err := protocol.ValidateLockDelays([]protocol.NamespaceLockDelay{{Delay: time.Second}}); err == nil || !strings.Contains(err.Error(), `"*"`) {
		t.Fatalf("ValidateLockDelays(empty glob) = %v; want an error naming \"*\" for every namespace", err)
	}
	if err := protocol.ValidateLockDelays([]protocol.NamespaceLockDelay{{Namespaces: "jobs-eu", Delay: 0}, {Namespaces: "jobs-*", Delay: time.Second}, {Namespaces: "*", Delay: time.Second}}); err != nil {
		t.Fatalf("ValidateLockDelays(jobs-eu, jobs-*, *) = %v; want nil", err)
	}
}
