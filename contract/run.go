package contract

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// opTimeout bounds every operation the suite runs. It is generous because
// the suite's contention cases run on loaded machines; no case waits for it.
const opTimeout = 30 * time.Second

// testCase is one named subtest of the suite.
type testCase struct {
	name string
	run  func(e *env)
}

// group is a named set of cases, run as nested subtests.
type group struct {
	name  string
	cases []testCase
}

// Run runs the contract suite against the backend that newHarness makes.
// Every subtest calls newHarness for a fresh, isolated store, wraps the
// harness's two handles in [protocol.Runtime]s and closes both when the
// subtest ends (before the factory's own cleanups run). The suite never
// sleeps: it moves the [Clock] that it passes to the factory, so the
// backend's test-only clock option must read it.
//
// What a backend must provide beyond the protocol: that clock hook (every
// case reads lease and audit times against it), two handles on one store,
// and an [audit.Reader]. The suite writes no raw rows: refusing rows of an
// unknown format version is left to each backend's own tests, which can
// write such rows with raw statements.
//
// Beyond DESIGN.md's table the suite pins these details: a lease is live
// while now < expires_at (at expires_at it is expired); a not_found result
// carries no lease, except a get's while the lock-delay of the key's ended
// lease keeps the key (it carries that lease, as acquire's conflict); list orders names byte by byte (PostgreSQL's "C"
// collation) and treats a prefix literally (LIKE's % _ and \ are plain
// characters); expired rows stay listable with include_expired until an
// acquire replaces them or a sweep removes them (released and revoked
// leases are never listed); audit Since is inclusive; a page of exactly Limit
// items is the last one (empty next cursor).
//
// Subtests run in parallel (each has a store of its own, so the factory
// must be safe to call concurrently); the contention cases start goroutines
// of their own on both handles.
func Run(t *testing.T, newHarness Factory) {
	t.Helper()
	groups := []group{
		{"Acquire", acquireCases()},
		{"Renew", holderCases(renewOp)},
		{"RenewKeepsTTL", renewKeepsTTLCases()},
		{"RenewMany", renewManyCases()},
		{"Release", holderCases(releaseOp)},
		{"Revoke", revokeCases()},
		{"LockDelay", lockDelayCases()},
		{"HolderHearsLoss", lossCases()},
		{"Fencing", fencingCases()},
		{"Get", getCases()},
		{"List", listCases()},
		{"Namespaces", namespaceCases()},
		{"Idempotency", idempotencyCases()},
		{"Audit", auditCases()},
		{"Retention", retentionCases()},
		{"Sweep", sweepCases()},
		{"Contention", contentionCases()},
		{"Wait", waitCases()},
		{"Watch", watchCases()},
		{"Invalid", invalidCases()},
		{"Lifecycle", lifecycleCases()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(newEnv(t, newHarness))
				})
			}
		})
	}
}

// env is one subtest's view of a fresh store: two runtimes over the
// harness's handles, the audit reader and the clock.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	a, b  *protocol.Runtime // over Harness.Backend and Harness.Second
	audit audit.Reader
	h     Harness
	ns    string // the namespace most cases work in
	seq   atomic.Int64
	gets  atomic.Int64 // gets answered through a (see holdForLoss)
}

func newEnv(t *testing.T, newHarness Factory) *env {
	t.Helper()
	clock := NewClock()
	h := newHarness(t, clock)
	if h.Backend == nil || h.Second == nil || h.Audit == nil {
		t.Fatalf("contract: the factory returned an incomplete harness: %+v", h)
	}
	cfg := &protocol.Config{DefaultTimeout: opTimeout}
	e := &env{
		t:     t,
		ctx:   t.Context(),
		clock: clock,
		b:     protocol.New(h.Second, cfg),
		audit: h.Audit,
		h:     h,
		ns:    newNamespace(),
	}
	e.a = protocol.New(h.Backend, &protocol.Config{DefaultTimeout: opTimeout,
		Observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
			if ev.Op == protocol.OpGet {
				e.gets.Add(1)
			}
		})})
	// Registered after the factory ran, so this runs before the factory's
	// cleanups (dropping a schema, removing a file).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := e.a.Close(ctx); err != nil {
			t.Errorf("close first runtime: %v", err)
		}
		if err := e.b.Close(ctx); err != nil {
			t.Errorf("close second runtime: %v", err)
		}
	})
	return e
}

// newNamespace returns a namespace no other env uses ("contract-" and 8
// random hex digits). Stores of parallel subtests, and of other test
// processes, may share one database, and PostgreSQL's key locks are the
// database's, not the schema's: under one fixed name a case holding
// contract/k2 made another case's sweep skip its own k2 (it tries key
// locks, never waits for them) and miscount.
func newNamespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "contract-" + hex.EncodeToString(b[:])
}

// key returns the key name in the env's namespace.
func (e *env) key(name string) protocol.Key { return protocol.Key{Namespace: e.ns, Name: name} }

// rid returns a request id unique within the subtest.
func (e *env) rid() string { return fmt.Sprintf("req-%d", e.seq.Add(1)) }
