package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// A lock-delay out of range is refused with the durations written as users
// write them (durations.Format), as the runtime writes the same range
// ("lock delay: 2h is outside [0, 1h]"), not as Go prints a
// time.Duration ("2h0m0s is outside [0, 1h0m0s]").
func TestLockDelayRangeMessageWritesDurationsAsUsersDo(t *testing.T) {
	t.Parallel()
	// The runtime's answer to the same lock-delay, for comparison.
	_, rterr := protocol.New(memstore.New(nil), nil).Acquire(context.Background(), protocol.AcquireRequest{
		Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Minute, LockDelay: 2 * time.Hour})
	if rterr == nil || !strings.Contains(rterr.Error(), "lock delay: 2h is outside [0, 1h]") {
		t.Fatalf("the runtime's refusal of a 2h lock-delay: %v; the comparison is wrong", rterr)
	}
	cfg := &scheduler.Config{TTL: 30 * time.Second, LockDelay: 2 * time.Hour}
	_, err := scheduler.New(memstore.New(nil), "w1", scheduler.Static("t"), func(context.Context, string, int64) {}, cfg)
	if err == nil {
		t.Fatal("New accepted a lock-delay of 2h")
	}
	if !strings.Contains(err.Error(), "lock delay: 2h is outside [0, 1h]") {
		t.Errorf("New with LockDelay 2h: %q; want \"lock delay: 2h is outside [0, 1h]\", as the runtime writes it", err)
	}
}
