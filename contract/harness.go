// Package contract is the backend contract suite: every leasestore backend's
// tests call [Run] with a factory, and the suite checks the semantics that no
// backend may bend (DESIGN.md): the status precedence, fencing, atomic audit,
// idempotent replay, contention across handles, validation and lifecycle.
//
// It is an ordinary package (it imports testing) so that backends in other
// modules can run it too. It must not import any database driver or any
// package under sqlstore/.
package contract

import (
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// Clock is a manual clock shared by a harness's handles. The suite moves it
// with Advance to pass TTLs without sleeping. It is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	real bool // Now reads the wall clock (see Real)
}

// ClockStart is where every suite clock starts: a fixed instant, aligned to
// the microsecond as the SQL backends store times.
var ClockStart = time.Date(2030, 1, 2, 3, 4, 5, 678000, time.UTC)

// NewClock returns a Clock at [ClockStart].
func NewClock() *Clock { return &Clock{now: ClockStart} }

// Now returns the clock's time. Pass it to a backend's test-only clock option.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		return time.Now().UTC().Truncate(time.Microsecond)
	}
	return c.now
}

// Real makes the clock read the wall clock from now on, for the cases
// that wait for a lease to expire: a waiter sleeps until the holder's
// expiry by the wall clock, which a manual clock cannot move.
func (c *Clock) Real() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.real = true
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Harness is what a factory gives the suite for one test: an isolated,
// empty store reached through two independent handles.
type Harness struct {
	// Backend is the first handle. The suite wraps it in a protocol.Runtime
	// and closes that runtime (and so the backend) when the test ends. The
	// Invalid group's direct cases also call both handles directly, as code
	// that uses a backend without a runtime does: each must refuse what the
	// runtime refuses, with the runtime's answer, and a change without a
	// request id (see protocol.Backend).
	Backend protocol.Backend
	// Second is another handle on the same store, as a second process would
	// have it (for SQL: a separate pool or *sql.DB). The suite closes it too;
	// one lifecycle case closes it directly (not through its runtime) and
	// checks that every call it offers answers closed ([ExpectClosed]).
	Second protocol.Backend
	// Audit reads the store's audit trail. It must not depend on Second:
	// the suite closes Second early in its lifecycle cases and still reads
	// the trail afterwards. The first handle, when it implements
	// audit.Reader, is the natural choice.
	Audit audit.Reader
	// ServesLockDelays says that the handles are clients of stores served
	// elsewhere (httpapi clients), whose serving runtimes have the
	// namespace defaults of the lock-delay [HandleLockDelays] gives (the
	// first handle's the first, the second's the second). Otherwise the
	// suite's cases on those defaults put runtimes of their own, with
	// them, over the handles. With it set, the Invalid group's direct cases
	// are skipped: the serving runtime checks the requests (and makes the
	// request id of a change sent without one).
	ServesLockDelays bool
}

// HandleLockDelays returns the namespace defaults of the lock-delay that
// the suite's cases on defaults run under, one list per handle, as two
// servers on one store with different `serve --lock-delay` (or one
// restarted with another) have them: a namespace under
// "contract-default-" takes 7s through the first handle and 30s through
// the second. No other case uses such a namespace.
func HandleLockDelays() (first, second []protocol.NamespaceLockDelay) {
	return []protocol.NamespaceLockDelay{{Namespaces: "contract-default-*", Delay: 7 * time.Second}},
		[]protocol.NamespaceLockDelay{{Namespaces: "contract-default-*", Delay: 30 * time.Second}}
}

// Factory makes a fresh, isolated store for one test and returns handles on
// it whose clocks read clock.Now. It registers with t.Cleanup whatever must be
// dropped after the suite has closed the handles (a schema, a file).
type Factory func(t *testing.T, clock *Clock) Harness
