package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// queuedOp is one operation sent into a batch by batchOf.
type queuedOp struct {
	name string
	run  func(ctx context.Context) (protocol.Result, error)
	// inline ops run in the test's goroutine between the queued ones,
	// queue nothing and give no answer.
	inline bool
}

type answer struct {
	res protocol.Result
	err error
}

// batchOf makes ops go to the server as one batch, in order: the backend
// (MaxInFlight 1, WithHeldQueue) is kept busy by an acquire of a key whose advisory lock
// another connection holds, each op is started once the one before waits
// in the queue, and then the lock is let go. It returns the answers by
// name.
func batchOf(t *testing.T, dsn string, b *postgres.Backend, ops ...queuedOp) map[string]answer {
	t.Helper()
	ctx := ctxT(t)
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	// A key of its own: advisory locks are the database's, shared by every
	// schema and test process.
	blocker := key("blocker-" + protocol.RandomRequestID()[:12])
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_lock(1818583411, hashtext($1))`,
		blocker.Namespace+"/"+blocker.Name); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: blocker, Owner: "x", TTL: time.Minute,
			RequestID: protocol.RandomRequestID()})
		blocked <- err
	}()
	// The blocker holds the one slot once it waits on the locker's lock on
	// the server (only a wait on this locker counts: another session's
	// waits do not say that the blocker is there).
	waitFor(t, func() bool { return waitsOn(ctx, locker) > 0 })
	type named struct {
		name string
		a    answer
	}
	answers := make(chan named, len(ops))
	queued := 0
	for _, op := range ops {
		if op.inline {
			_, _ = op.run(ctx)
			queued = postgres.QueueLen(b)
			continue
		}
		go func() {
			res, err := op.run(ctx)
			answers <- named{op.name, answer{res, err}}
		}()
		queued++
		waitFor(t, func() bool { return postgres.QueueLen(b) == queued })
	}
	before, _, _ := postgres.CoalesceStats(b)
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_unlock(1818583411, hashtext($1))`, blocker.Namespace+"/"+blocker.Name); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	out := map[string]answer{}
	for range len(ops) - inlineOps(ops) {
		a := <-answers
		out[a.name] = a.a
	}
	after, _, _ := postgres.CoalesceStats(b)
	if after != before+1 {
		t.Fatalf("%d batches sent, want 1", after-before)
	}
	return out
}

func inlineOps(ops []queuedOp) (n int) {
	for _, op := range ops {
		if op.inline {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Operations in one batch behave as if run one after the other in the
// order they queued: an acquire sees the lease an earlier one took, a
// repeated request id replays (and with other parameters is invalid), a
// revoke ends the lease and the next acquire gets a greater token. An
// operation the server refuses mid-batch (a trigger that raises) fails
// alone, and its change is rolled back; a row of an unknown format version
// fails its operation alone. Every change has its audit record, with
// distinct ids above every earlier record, in the order of the changes,
// and a follower reads them all. The batch's keys have names no other
// test uses: a key's advisory lock is the database's, not the schema's,
// and a parallel test holding ns/k made the batch find k busy and run a
// alone after b (seen once in make test: a answered conflict).
func TestCoalescedBatchSemantics(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxConns: 4, MaxInFlight: 1}))
	ctx := ctxT(t)
	pool := rawPool(t, dsn)
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.request_id = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER boom BEFORE INSERT ON leasestore_audit FOR EACH ROW EXECUTE FUNCTION boom();
		INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		VALUES ('ns', 'sem-future', 'o', 1, now(), now(), now() + interval '1 hour', 99)`); err != nil {
		t.Fatal(err)
	}
	first, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("before"), Owner: "o", TTL: time.Minute, RequestID: "before"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("sem-w"), Owner: "o", TTL: time.Minute, RequestID: "held"})
	if err != nil {
		t.Fatal(err)
	}
	woken, unsubscribe, err := b.Subscribe(ctx, key("sem-w"))
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	acq := func(name, owner, rid string, ttl time.Duration) queuedOp {
		return queuedOp{name: name, run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("sem-k"), Owner: owner, TTL: ttl, RequestID: rid})
		}}
	}
	got := batchOf(t, dsn, b,
		acq("a", "A", "r1", time.Minute),
		acq("b", "B", "r2", time.Minute),
		acq("c", "A", "r1", time.Minute),
		acq("d", "A", "r1", time.Hour),
		queuedOp{name: "boom", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("sem-boom"), Owner: "Z", TTL: time.Minute, RequestID: "boom"})
		}},
		queuedOp{name: "future", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("sem-future"), Owner: "Z", TTL: time.Minute, RequestID: "fut"})
		}},
		queuedOp{name: "e", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Revoke(ctx, protocol.RevokeRequest{Key: key("sem-k"), Actor: "ops", Reason: "test", RequestID: "r5"})
		}},
		acq("f", "B", "r6", time.Minute),
		queuedOp{name: "g", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Release(ctx, protocol.ReleaseRequest{Key: key("sem-nothing"), Owner: "X", Token: 5, RequestID: "r7"})
		}},
		queuedOp{name: "w", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Release(ctx, protocol.ReleaseRequest{Key: key("sem-w"), Owner: "o", Token: held.Lease.Token, RequestID: "r8"})
		}},
	)
	if r := got["w"]; r.err != nil || r.res.Status != protocol.StatusReleased {
		t.Fatalf("w: %+v %v", r.res, r.err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter of w was not woken by the batched release")
	}
	a := got["a"]
	if a.err != nil || a.res.Status != protocol.StatusAcquired || a.res.Lease.Token <= first.Lease.Token {
		t.Fatalf("a: %+v %v", a.res, a.err)
	}
	if r := got["b"]; r.res.Status != protocol.StatusConflict || r.res.Lease == nil || r.res.Lease.Owner != "A" || r.res.Lease.Token != a.res.Lease.Token {
		t.Fatalf("b: %+v %v, want conflict with a's lease", r.res, r.err)
	}
	if r := got["c"]; r.err != nil || !r.res.Replayed || r.res.Lease.Token != a.res.Lease.Token {
		t.Fatalf("c: %+v %v, want a replay of a", r.res, r.err)
	}
	if r := got["d"]; r.res.Status != protocol.StatusInvalid && !errors.Is(r.err, protocol.ErrInvalid) {
		t.Fatalf("d: %+v %v, want invalid (request id reused with other parameters)", r.res, r.err)
	}
	if r := got["boom"]; r.err == nil || !errors.Is(r.err, protocol.ErrUnavailable) {
		t.Fatalf("boom: %+v %v, want unavailable", r.res, r.err)
	}
	if r := got["future"]; r.err == nil {
		t.Fatalf("future: %+v, want a format version error", r.res)
	}
	if r := got["e"]; r.err != nil || r.res.Status != protocol.StatusRevoked || r.res.Lease.Token != a.res.Lease.Token {
		t.Fatalf("e: %+v %v", r.res, r.err)
	}
	f := got["f"]
	if f.err != nil || f.res.Status != protocol.StatusAcquired || f.res.Lease.Token <= a.res.Lease.Token {
		t.Fatalf("f: %+v %v", f.res, f.err)
	}
	if r := got["g"]; r.err != nil || r.res.Status != protocol.StatusNotFound {
		t.Fatalf("g: %+v %v", r.res, r.err)
	}
	// The refused operation's change was rolled back: the key is free.
	if r, err := b.Get(ctx, protocol.GetRequest{Key: key("sem-boom")}); err != nil || r.Status != protocol.StatusNotFound {
		t.Fatalf("boomkey after the refused acquire: %+v %v", r, err)
	}

	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	// A follower reads them all once no older transaction of the cluster
	// (another test's, say) holds it back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		fp, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(fp.Records) == len(page.Records) {
			break
		}
		if !fp.HeldBack || time.Now().After(deadline) {
			t.Fatalf("a follower read %d records of %d (held back: %v)", len(fp.Records), len(page.Records), fp.HeldBack)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ops []string
	seen := map[int64]bool{}
	var last int64
	for _, r := range page.Records {
		if seen[r.ID] || r.ID <= last {
			t.Fatalf("audit ids not distinct and increasing: %+v", page.Records)
		}
		seen[r.ID], last = true, r.ID
		ops = append(ops, string(r.Op)+":"+r.Key+":"+r.RequestID)
	}
	if !strings.HasPrefix(page.Records[2].Key, "blocker-") {
		t.Fatalf("third record %+v, want batchOf's blocker", page.Records[2])
	}
	want := []string{"acquire:before:before", "acquire:sem-w:held", "acquire:" + page.Records[2].Key + ":" + page.Records[2].RequestID, "acquire:sem-k:r1",
		"revoke:sem-k:r5", "acquire:sem-k:r6", "release:sem-w:r8"}
	if len(ops) != len(want) {
		t.Fatalf("trail %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("trail %v, want %v", ops, want)
		}
	}
}

// A caller whose deadline passes while its operation waits in the queue
// gets timeout and its operation is never sent; the operations queued with
// it go on. One caller at a time never makes a batch.
func TestCoalescedCallerGivesUp(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxConns: 4, MaxInFlight: 1}))
	for i := range 5 {
		ctx := ctxT(t)
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("solo"), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		if err != nil || res.Status != protocol.StatusAcquired {
			t.Fatalf("solo %d: %+v %v", i, res, err)
		}
		if _, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("solo"), Owner: "o", Token: res.Lease.Token, RequestID: protocol.RandomRequestID()}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _ := postgres.CoalesceStats(b); n != 0 {
		t.Fatalf("%d batches from one caller at a time, want 0", n)
	}

	impatient, cancel := context.WithCancel(ctxT(t))
	got := batchOf(t, dsn, b,
		queuedOp{name: "waits-1", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("w1"), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
		queuedOp{name: "gives-up", run: func(context.Context) (protocol.Result, error) {
			return b.Acquire(impatient, protocol.AcquireRequest{Key: key("never"), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
		queuedOp{name: "cancel", inline: true, run: func(context.Context) (protocol.Result, error) {
			cancel()
			waitFor(t, func() bool { return postgres.QueueLen(b) == 1 }) // it left the queue
			return protocol.Result{}, nil
		}},
		queuedOp{name: "waits-2", run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("w2"), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
	)
	if r := got["gives-up"]; !errors.Is(r.err, protocol.ErrTimeout) {
		t.Fatalf("gives-up: %+v %v, want timeout", r.res, r.err)
	}
	for _, n := range []string{"waits-1", "waits-2"} {
		if r := got[n]; r.err != nil || r.res.Status != protocol.StatusAcquired {
			t.Fatalf("%s: %+v %v", n, r.res, r.err)
		}
	}
	if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("never")}); err != nil || r.Status != protocol.StatusNotFound {
		t.Fatalf("the abandoned acquire was sent: %+v %v", r, err)
	}
}

// When the server refuses the batch function (no TEMP privilege on the
// database), a batch's operations run one by one, each its own round
// trip, so a slot that waited for its callers after a batch would save
// nothing: from the refused batch on, no batch waits. The refused batch's
// operations run again alone and take effect.
func TestRefusedBatchFunctionStopsGathering(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxConns: 4, MaxInFlight: 1}))
	postgres.RefuseBatchFunction(b)
	acq := func(name string) queuedOp {
		return queuedOp{name: name, run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}}
	}
	got := batchOf(t, dsn, b, acq("r1"), acq("r2"), acq("r3"))
	for name, a := range got {
		wantStatus(t, name, a.res, a.err, protocol.StatusAcquired)
	}
	if !postgres.NoBatch(b) {
		t.Fatal("the backend still batches after the server refused the batch function: the test proves nothing")
	}
	if waited, _ := postgres.Gathered(b); waited != 0 {
		t.Errorf("%d batches waited for their callers after the server refused the batch function, want 0", waited)
	}

	// Callers in a loop: their batches run one by one and none waits.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			ctx := ctxT(t)
			for j := range 5 {
				k := key(fmt.Sprintf("loop-%d-%d", i, j))
				res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
				if err != nil || res.Status != protocol.StatusAcquired {
					t.Errorf("acquire %s: %+v %v", k.Name, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if waited, _ := postgres.Gathered(b); waited != 0 {
		t.Errorf("%d batches waited for their callers with batching refused, want 0", waited)
	}
}
