package wire_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// A lease's lock_delay is written in the one duration grammar as a user
// writes it (contract v3): 1h, not Go's 1h0m0s; 2d, not 48h0m0s.
func TestLockDelayIsWrittenAsUsersWriteIt(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "", 15 * time.Second: "15s", time.Hour: "1h", 90 * time.Minute: "1h30m", 48 * time.Hour: "2d",
	} {
		if got := wire.FromLease(protocol.Lease{LockDelay: d}).LockDelay; got != want {
			t.Errorf("lock_delay of %v: %q, want %q", d, got, want)
		}
	}
}
