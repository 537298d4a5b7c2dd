package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// A sweep never removes the row of a lease whose lock-delay has not ended
// (protocol.Sweeper: "a lease that has not ended (nor its lock-delay) is
// never removed"), so under Sweeping the model may take a not_found for a
// swept row only once the delay is over. Here a's lease (ttl 10ms,
// lock-delay 50ms) expires at 10.5ms and the key is kept until 60.5ms: a
// renew at 20ms answering not_found claims a sweep inside the delay, and
// b's acquire at 30ms then takes the key inside a's lock-delay. The same
// answers after the delay (renew at 70ms, acquire at 80ms) are fine.
func TestCheckSweepingKeepsTheLockDelay(t *testing.T) {
	t.Parallel()
	const (
		ttl   = 10 * time.Millisecond
		delay = 50 * time.Millisecond
	)
	build := func(renewAt, acquireAt float64) *lincheck.History {
		return &new(hist).
			op(0, 0, 1, acquireDelayed("a", ttl, delay), out(protocol.StatusAcquired, delayedLease(delay, "a", 5, expAt(0.5, ttl)))).
			op(0, renewAt, renewAt+1, renew("a", 5, ttl), out(protocol.StatusNotFound, nil)).
			op(1, acquireAt, acquireAt+1, acquire("b", long), out(protocol.StatusAcquired, lease("b", 6, expAt(acquireAt+0.5, long)))).h
	}
	opts := func(dir string) *lincheck.CheckOptions {
		return &lincheck.CheckOptions{Dir: dir, Sweeping: true, SweepGrace: time.Nanosecond}
	}
	if _, err := lincheck.Check(build(70, 80), opts(t.TempDir())); err != nil {
		t.Fatalf("swept after the lock-delay ended, then taken: %v", err)
	}
	if _, err := lincheck.Check(build(20, 30), opts(t.TempDir())); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("swept inside the lock-delay (renew not_found at 20ms) and taken by b at 30ms, before the delay ends at 60.5ms: Check answered %v, want ErrNotLinearizable", err)
	}
}
