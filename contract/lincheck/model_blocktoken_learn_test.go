package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// While a revoked lease's lock-delay keeps the key, every conflict carries
// that one ended lease: once a conflict showed the token that an acquire of
// unknown outcome got, later conflicts carry the same token, and a later
// acquire gets a greater one.
func TestCheckLockDelayConflictsShowOneToken(t *testing.T) {
	t.Parallel()
	const delay = 50 * time.Millisecond
	build := func(second int64, next int64) *lincheck.History {
		return &new(hist).
			op(0, 0, 1, acquire("z", long), out(protocol.StatusAcquired, lease("z", 5, expAt(0.5, long)))).
			op(0, 2, 3, release("z", 5), out(protocol.StatusReleased, lease("z", 5, expAt(0.5, long)))).
			op(1, 4, 5, acquireDelayed("a", long, delay), unknown).
			op(2, 6, 7, revoke(0), unknown).
			op(3, 8, 9, acquire("b", long), out(protocol.StatusConflict, delayedLease(delay, "a", 7, 0))).
			op(3, 10, 11, acquire("b", long), out(protocol.StatusConflict, delayedLease(delay, "a", second, 0))).
			op(3, 100, 101, acquire("b", long), out(protocol.StatusAcquired, lease("b", next, expAt(100.5, long)))).h
	}
	if _, err := lincheck.Check(build(7, 8), &lincheck.CheckOptions{Dir: t.TempDir()}); err != nil {
		t.Fatalf("two conflicts carrying a's token 7, then token 8: %v", err)
	}
	if _, err := lincheck.Check(build(8, 9), &lincheck.CheckOptions{Dir: t.TempDir()}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("conflicts carrying a's one ended lease with token 7, then 8: Check answered %v, want ErrNotLinearizable", err)
	}
	if _, err := lincheck.Check(build(7, 7), &lincheck.CheckOptions{Dir: t.TempDir()}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("token 7, shown as a's by a conflict, issued again after the lock-delay: Check answered %v, want ErrNotLinearizable", err)
	}
}
