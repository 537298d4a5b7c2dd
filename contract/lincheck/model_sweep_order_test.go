package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// A not_found for a swept row says a sweep ran before it, and a sweep runs
// only once the lease ended more than the grace ago and its lock-delay is
// over. An acquire that took the key after that sweep cannot have returned
// before the sweep could run, even when the not_found's own interval is
// long enough to reach past that time: before the sweep the ended lease's
// row (or its lock-delay) was there, and after the acquire its row is the
// acquirer's, for which the holder's renew would not answer not_found.
func TestCheckAcquireAfterSweepNotBeforeItCanRun(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Millisecond
	cases := []struct {
		name         string
		delay, grace time.Duration
		renewAt      [2]float64 // the renew answering not_found
		acquireAt    float64    // b's acquire
		ok           bool
	}{
		// a's lease expires at 10.5ms; with a grace of 20ms no sweep
		// runs before 30.5ms.
		{"acquired after the sweep could run", 0, 20 * time.Millisecond, [2]float64{5, 40}, 35, true},
		{"acquired before the grace passed", 0, 20 * time.Millisecond, [2]float64{5, 40}, 12, false},
		// A lock-delay of 50ms keeps the key, and the row, until 60.5ms.
		{"acquired after the lock-delay and the sweep", 50 * time.Millisecond, time.Nanosecond, [2]float64{20, 70}, 65, true},
		{"acquired inside the lock-delay", 50 * time.Millisecond, time.Nanosecond, [2]float64{20, 70}, 30, false},
	}
	for _, c := range cases {
		h := new(hist).
			op(0, 0, 1, acquireDelayed("a", ttl, c.delay), out(protocol.StatusAcquired, delayedLease(c.delay, "a", 5, expAt(0.5, ttl)))).
			op(0, c.renewAt[0], c.renewAt[1], renew("a", 5, ttl), out(protocol.StatusNotFound, nil)).
			op(1, c.acquireAt, c.acquireAt+1, acquire("b", long), out(protocol.StatusAcquired, lease("b", 6, expAt(c.acquireAt+0.5, long)))).h
		_, err := lincheck.Check(&h, &lincheck.CheckOptions{Dir: t.TempDir(), Sweeping: true, SweepGrace: c.grace})
		switch {
		case c.ok && err != nil:
			t.Errorf("%s (renew not_found in [%vms, %vms], b's acquire at %vms): %v", c.name, c.renewAt[0], c.renewAt[1], c.acquireAt, err)
		case !c.ok && !errors.Is(err, lincheck.ErrNotLinearizable):
			t.Errorf("%s (renew not_found in [%vms, %vms], b's acquire at %vms): Check answered %v, want ErrNotLinearizable",
				c.name, c.renewAt[0], c.renewAt[1], c.acquireAt, err)
		}
	}
}
