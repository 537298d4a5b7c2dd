package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// A lease taken by an acquire of unknown outcome has a token the model
// does not know, but one greater than every token issued before it. When
// a revoke (of unknown outcome too) ends it and its lock-delay keeps the
// key, a conflict carries that ended lease: its token must still be one
// that acquire could have been issued. Here tokens up to 5 were issued
// before a's acquire, so a conflict naming a's lease with token 3 is a
// backend answering a token a never had (and one going backwards); the
// same conflict with token 7 is possible.
func TestCheckRejectsLockDelayConflictWithImpossibleToken(t *testing.T) {
	t.Parallel()
	const delay = 50 * time.Millisecond
	build := func(token int64) *hist {
		return new(hist).
			op(0, 0, 1, acquire("z", long), out(protocol.StatusAcquired, lease("z", 5, expAt(0.5, long)))).
			op(0, 2, 3, release("z", 5), out(protocol.StatusReleased, lease("z", 5, expAt(0.5, long)))).
			op(1, 4, 5, acquireDelayed("a", long, delay), unknown).
			op(2, 6, 7, revoke(0), unknown).
			op(3, 8, 9, acquire("b", long), out(protocol.StatusConflict, delayedLease(delay, "a", token, 0)))
	}
	if _, err := lincheck.Check(&build(7).h, &lincheck.CheckOptions{Dir: t.TempDir()}); err != nil {
		t.Fatalf("a conflict carrying a's ended lease with token 7 (possible): %v", err)
	}
	_, err := lincheck.Check(&build(3).h, &lincheck.CheckOptions{Dir: t.TempDir()})
	if !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("a conflict carrying a's ended lease with token 3, below the 5 issued before a's acquire: Check answered %v, want ErrNotLinearizable", err)
	}
}
