package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
)

// Config.MaxBackoff "caps the wait before a target that another worker
// took first (a conflict) is tried again". After many conflicts in a row
// no back-off may reach past MaxBackoff (the random factor in [0.5, 1.5)
// is applied after the cap, so half the waits exceed it, up to 1.5 ×).
func TestMaxBackoffCapsTheWait(t *testing.T) {
	const maxBackoff = 2 * time.Second
	s, err := New(memstore.New(nil), "w1", Static("x"), func(context.Context, string, int64) {},
		&Config{TTL: 30 * time.Second, RenewEvery: time.Second, MaxBackoff: maxBackoff})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 40; i++ {
		before := time.Now()
		s.backOff("x")
		if wait := s.backoff["x"].until.Sub(before); wait > maxBackoff {
			t.Fatalf("conflict %d in a row: backed off %v, longer than MaxBackoff %v", i, wait.Round(time.Millisecond), maxBackoff)
		}
	}
}
