// Package schedulertest is the scheduler's suite on a real store: every
// backend's tests call [Run] with a factory, as they call contract.Run, and
// the suite runs fleets of [scheduler.Scheduler] workers against that
// backend with short TTLs: they converge to fair shares, take over a dead
// worker's targets, never let a fenced resource accept a write of a lost
// lease after its successor's, and release everything on shutdown.
//
// The suite uses the real clock (each case takes a few TTLs of 2s) and
// waits for conditions by polling snapshots and the store with a deadline,
// never by sleeping a fixed time. It must not import any database driver or
// any package under sqlstore/.
package schedulertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Harness is what a factory gives the suite for one case.
type Harness struct {
	// NewStore returns a new handle on the case's store, as another process
	// would have it (for SQL: its own pool or *sql.DB), wrapped in a
	// protocol.Runtime. Every worker gets its own; the suite closes each
	// handle when the case ends. It must be safe for concurrent use.
	NewStore func(t *testing.T) protocol.Store
	// Resource is a resource fenced by tokens, empty at the start, in the
	// same database as the store where there is one.
	Resource Resource
	// LateExpiry is how late, never early, the store may judge that a
	// lease ran out or that a lock-delay ended, as its documentation states
	// (etcd: about 3 s, DESIGN.md and docs/etcd.md); zero for a store that
	// judges both at their time by its clock. The cases that time a take
	// after an expiry or a lock-delay's end (Takeover, LockDelayBackOff,
	// MembershipRevokeLockDelay) allow that much more, and only that; a
	// take before the store's time still fails.
	LateExpiry time.Duration
}

// lateness describes h.LateExpiry for a bound's message: "" when zero.
func (h Harness) lateness() string {
	if h.LateExpiry == 0 {
		return ""
	}
	return fmt.Sprintf(" + the store's documented lateness of %v", h.LateExpiry)
}

// Factory makes a fresh, isolated store (and resource) for one case. It
// registers with t.Cleanup whatever must be dropped after the suite closed
// the handles. The suite calls it once per case and runs its cases one
// after the other, never two at once (see [Run]); the backend's other tests
// may run meanwhile.
type Factory func(t *testing.T) Harness

// Resource is a resource fenced by tokens: for each target it accepts a
// write only when the write's token is at least the highest token it
// accepted for that target, and keeps a log of the accepted writes. It
// must be safe for concurrent use.
type Resource interface {
	// Write writes for target with token on behalf of writer and reports
	// whether the resource accepted it.
	Write(ctx context.Context, target string, token int64, writer string) (bool, error)
	// Accepted returns every accepted write in the order it was accepted
	// (for writes of one target, at least).
	Accepted(ctx context.Context) ([]Write, error)
}

// Write is one accepted write of a [Resource].
type Write struct {
	Target string
	Token  int64
	Writer string
}

// MemResource returns a [Resource] in memory, for backends without a
// database of their own (memstore).
func MemResource() Resource { return &memResource{last: map[string]int64{}} }

type memResource struct {
	mu   sync.Mutex
	last map[string]int64
	log  []Write
}

func (r *memResource) Write(_ context.Context, target string, token int64, writer string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.last[target]; ok && token < last {
		return false, nil
	}
	r.last[target] = token
	r.log = append(r.log, Write{Target: target, Token: token, Writer: writer})
	return true, nil
}

func (r *memResource) Accepted(context.Context) ([]Write, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.log...), nil
}
