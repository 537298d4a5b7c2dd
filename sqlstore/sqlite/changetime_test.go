package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/changetimes"
)

// The time a change records is the time it takes effect: SQLite reads its
// clock inside the write lock, so under contention on two keys (12 callers
// on four handles of one file, which wait for each other's write lock, and
// a sweeper with grace 0) every acquire in the trail starts at or after the
// end of the key's previous lease. This held before the PostgreSQL fix of
// the same rule; it guards the clock read's place (read before BEGIN, 10-13
// of 500-800 acquires started early).
func TestChangeTimesFollowLockWaits(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	a := open(t, path, nil)
	changetimes.Contend(t, []changetimes.Handle{a, open(t, path, nil), open(t, path, nil), open(t, path, nil)}, "times", 2*time.Second)
	changetimes.Check(t, a, "times")
}
