package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Writes that queue while one runs go in one transaction, in order: an
// acquire sees the lease an earlier one took, a repeated request id
// replays, a revoke ends the lease and the next acquire gets a greater
// token; a write that fails half way is rolled back alone; every change has
// its audit record, in order.
func TestCoalescedWrites(t *testing.T) {
	t.Parallel()
	b := open(t, migratedFile(t), nil)
	release := sqlite.HoldWriter(b)
	defer release()
	type answer struct {
		res protocol.Result
		err error
	}
	answers := map[string]chan answer{}
	queued := 0
	start := func(name string, run func(ctx context.Context) (protocol.Result, error)) {
		ch := make(chan answer, 1)
		answers[name] = ch
		go func() {
			res, err := run(ctxT(t))
			ch <- answer{res, err}
		}()
		queued++
		deadline := time.Now().Add(10 * time.Second)
		for sqlite.WriteQueueLen(b) != queued {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not queue", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	acq := func(owner, rid string) func(ctx context.Context) (protocol.Result, error) {
		return func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: owner, TTL: time.Minute, RequestID: rid})
		}
	}
	start("a", acq("A", "r1"))
	start("b", acq("B", "r2"))
	start("c", acq("A", "r1"))
	boom := errors.New("boom")
	start("broken", func(ctx context.Context) (protocol.Result, error) {
		return protocol.Result{}, sqlite.FailingWrite(ctx, b, "broken", boom)
	})
	start("e", func(ctx context.Context) (protocol.Result, error) {
		return b.Revoke(ctx, protocol.RevokeRequest{Key: key("k"), Actor: "ops", Reason: "test", RequestID: "r5"})
	})
	start("f", acq("B", "r6"))
	before := sqlite.WriteBatches(b)
	release()
	got := map[string]answer{}
	for n, ch := range answers {
		got[n] = <-ch
	}
	if n := sqlite.WriteBatches(b) - before; n != 1 {
		t.Fatalf("%d batches, want 1", n)
	}
	a := got["a"]
	if a.err != nil || a.res.Status != protocol.StatusAcquired {
		t.Fatalf("a: %+v %v", a.res, a.err)
	}
	if r := got["b"]; r.res.Status != protocol.StatusConflict || r.res.Lease == nil || r.res.Lease.Owner != "A" {
		t.Fatalf("b: %+v %v, want conflict with a's lease", r.res, r.err)
	}
	if r := got["c"]; r.err != nil || !r.res.Replayed || r.res.Lease.Token != a.res.Lease.Token {
		t.Fatalf("c: %+v %v, want a replay of a", r.res, r.err)
	}
	if r := got["broken"]; r.err == nil {
		t.Fatal("broken: no error")
	}
	if r := got["e"]; r.err != nil || r.res.Status != protocol.StatusRevoked {
		t.Fatalf("e: %+v %v", r.res, r.err)
	}
	if r := got["f"]; r.err != nil || r.res.Status != protocol.StatusAcquired || r.res.Lease.Token <= a.res.Lease.Token {
		t.Fatalf("f: %+v %v", r.res, r.err)
	}
	if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("broken")}); err != nil || r.Status != protocol.StatusNotFound {
		t.Fatalf("the broken write was not rolled back: %+v %v", r, err)
	}
	page, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range page.Records {
		ops = append(ops, fmt.Sprintf("%s:%s", r.Op, r.RequestID))
	}
	if want := "[acquire:r1 revoke:r5 acquire:r6]"; fmt.Sprint(ops) != want {
		t.Fatalf("trail %v, want %s", ops, want)
	}
}

// Many writers at once: every operation answers as it should, writes are
// coalesced, and the trail has one record per change.
func TestCoalescedWritesUnderLoad(t *testing.T) {
	t.Parallel()
	b := open(t, migratedFile(t), nil)
	var wg sync.WaitGroup
	const workers, per = 8, 40
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				k := key(fmt.Sprintf("k-%d-%d", w, i))
				res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
				if err != nil || res.Status != protocol.StatusAcquired {
					t.Errorf("acquire %s: %+v %v", k, res, err)
					return
				}
				rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token, RequestID: protocol.RandomRequestID()})
				if err != nil || rel.Status != protocol.StatusReleased {
					t.Errorf("release %s: %+v %v", k, rel, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if sqlite.WriteBatches(b) == 0 {
		t.Fatal("no batch formed with 8 writers")
	}
	n := 0
	q := audit.Query{Namespace: "ns", Limit: 1000}
	for {
		p, err := b.ReadAudit(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Records)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if n != 2*workers*per {
		t.Fatalf("%d records, want %d", n, 2*workers*per)
	}
}

// A write whose deadline passes after its transaction began, while its
// statements run, answers timeout and writes nothing: alone, and in a
// batch whose latest deadline passed (the batch's deadline), where every
// member answers timeout. The statements run without the deadline (the
// driver's interrupt costs a goroutine a statement); the transaction
// itself must still refuse to commit.
func TestWritePastDeadlineCommitsNothing(t *testing.T) {
	t.Parallel()
	b := open(t, migratedFile(t), nil)
	wantNoRow := func(name string) {
		t.Helper()
		if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key(name)}); err != nil || r.Status != protocol.StatusNotFound {
			t.Fatalf("%s: the write was committed past its deadline: %+v %v", name, r, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	expectTimeout(t, "a lone write past its deadline", sqlite.SlowWrite(ctx, b, "alone", deadline.Add(100*time.Millisecond)))
	wantNoRow("alone")

	release := sqlite.HoldWriter(b)
	defer release()
	bctx, bcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer bcancel()
	late, _ := bctx.Deadline()
	errs := make(chan error, 2)
	go func() { errs <- sqlite.SlowWrite(bctx, b, "slow", late.Add(100*time.Millisecond)) }()
	waitQueued(bctx, t, b, 1)
	go func() {
		_, err := b.Acquire(bctx, protocol.AcquireRequest{Key: key("other"), Owner: "w", TTL: time.Minute, RequestID: "other"})
		errs <- err
	}()
	waitQueued(bctx, t, b, 2)
	before := sqlite.WriteBatches(b)
	release()
	for range 2 {
		expectTimeout(t, "a member of a batch past its deadline", <-errs)
	}
	if n := sqlite.WriteBatches(b) - before; n != 1 {
		t.Fatalf("%d batches, want the two writes in one", n)
	}
	wantNoRow("slow")
	wantNoRow("other")
	if n := auditLen(t, b); n != 0 {
		t.Fatalf("audit has %d records, want none", n)
	}
}
