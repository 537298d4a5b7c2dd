package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestPruneFitsTheClusterTxnLimit: a cluster whose --max-txn-ops is below
// the 102 operations of a full prune transaction (100 deletions, the
// mark, the prune's record) still prunes: a refused transaction applied
// nothing, so the prune halves its batches until they fit. It failed with
// unavailable ("too many operations in txn request") on every such
// cluster.
func TestPruneFitsTheClusterTxnLimit(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), &etcdcluster.Options{Members: 1, MaxTxnOps: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b := openAt(t, clockJudged(&etcd.Config{Endpoints: c.Endpoints(), Prefix: "/prune-limit/"}))
	rt := protocol.New(b, nil)
	ctx := t.Context()
	const records = 90
	for i := range records {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: fmt.Sprint("k", i)}, Owner: "o", TTL: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the leases have ended
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		t.Fatalf("prune on a cluster allowing 40 operations a transaction: %v", err)
	}
	if res.Removed != records {
		t.Fatalf("prune removed %d records, want %d", res.Removed, records)
	}
	leases, left, err := b.Counts(ctx)
	if err != nil || leases != records {
		t.Fatalf("after the prune: %d leases, %d records, %v; want %d leases", leases, left, err, records)
	}
	// Left: the prune's records, one for each transaction (the last under
	// its request id, counting them all).
	page, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, r := range page.Records {
		if r.Op != audit.OpPrune {
			t.Fatalf("after the prune: a %s record of %s is left", r.Op, r.Key)
		}
		if r.RequestID == "prune" && strings.HasPrefix(r.Reason, fmt.Sprintf("removed %d records before", records)) {
			whole++
		}
	}
	if int64(len(page.Records)) != left || whole != 1 {
		t.Fatalf("after the prune: %d records, %d of them the prune's record counting all %d; want only prune records, "+
			"one counting all", len(page.Records), whole, records)
	}
}

// TestPruneDeletesOnlyTheRecordsItRead: two prunes race and a request
// retried after the first removed its record runs again, writing a new
// record under the same key (namespace and request id). The slower prune,
// which read the old record before either prune deleted it, must not
// delete the new one: it is after the cut-off, and its id is above the
// greatest id the prunes mark as removed, so a reader from a cursor below
// it would skip it with no error. (The slower prune's transaction is held
// by an interceptor until the other prune and the retry are done.) Before,
// the prune deleted each record it had read by key alone, and the retried
// acquire's record was gone.
func TestPruneDeletesOnlyTheRecordsItRead(t *testing.T) {
	t.Parallel()
	fast, o, again := racedPrunes(t)
	ctx := t.Context()
	page, err := fast.ReadAudit(ctx, audit.Query{Namespace: "ns", Ops: []protocol.Op{protocol.OpAcquire}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].Token != again.Lease.Token {
		t.Fatalf("after the slow prune the trail of ns holds %d acquire records (%+v); want the retried acquire's, token %d, written after both prunes read",
			len(page.Records), page.Records, again.Lease.Token)
	}
	if o.res.Removed != 0 {
		t.Fatalf("the slow prune reports %d records removed; want 0 (the fast prune removed both it read)", o.res.Removed)
	}
}

// TestPruneByClockRefusesNeverSkips: a prune selects records by the time
// their writer's clock stamped them, and marks as removed the greatest id
// it removed. A record stamped an hour back by a client whose clock is
// behind, committed after a reader's cursor, is pruned while the records
// around it stay; the reader's next read from that cursor fails as
// pruned (it does not silently skip the record), though the record after
// it is still there: a prune by client clocks refuses too much, never
// skips. From a cursor at or after the removed id the read goes on.
func TestPruneByClockRefusesNeverSkips(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := open(t, clockJudged(&etcd.Config{Prefix: prefix})) // the lease stamped an hour back has ended
	behind := open(t, etcd.WithStampClock(&etcd.Config{Prefix: prefix}, func() time.Time { return time.Now().Add(-time.Hour) }))
	ctx := t.Context()
	acquire := func(on *etcd.Backend, name string) protocol.Lease {
		t.Helper()
		res, err := protocol.New(on, nil).Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return *res.Lease
	}
	first := acquire(b, "first")
	old := acquire(behind, "stamped-an-hour-back")
	last := acquire(b, "last")
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now().Add(-30 * time.Minute), Actor: "ops", RequestID: "prune"})
	if err != nil || res.Removed != 1 {
		t.Fatalf("prune: removed %d, %v; want the one record stamped an hour back", res.Removed, err)
	}
	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(first.Token)})
	if !errors.Is(err, audit.ErrPruned) {
		t.Fatalf("read from the cursor of the first record, after the prune removed the next: %+v, %v; want an error matching audit.ErrPruned", page.Records, err)
	}
	page, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(old.Token)})
	if err != nil || len(page.Records) != 1 || page.Records[0].Token != last.Token {
		t.Fatalf("read from the removed record's id: %+v, %v; want the last record", page.Records, err)
	}
}

// TestPruneRecordSaysWhatItRemoved: a prune's own audit record says how
// many records it removed ("removed N records before ..."), and so does
// its result (Removed). When a record the prune read is no longer there to
// delete (another prune at once removed it, and a retried request wrote a
// new record under its key, which the compare on its create revision now
// spares), the record must count what was deleted, not what was read: the
// two disagreed, the record claiming deletions that never happened (the
// reason was computed from the victims read before the transaction).
func TestPruneRecordSaysWhatItRemoved(t *testing.T) {
	t.Parallel()
	fast, o, _ := racedPrunes(t)
	ctx := t.Context()
	want := fmt.Sprintf("removed %d records before", o.res.Removed)
	if !strings.HasPrefix(o.res.Record.Reason, want) {
		t.Fatalf("the slow prune removed %d records, but its audit record says %q; want it to begin %q",
			o.res.Removed, o.res.Record.Reason, want)
	}
	page, err := fast.ReadAudit(ctx, audit.Query{Ops: []protocol.Op{audit.OpPrune}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Records {
		if r.RequestID == "slow-prune" && !strings.HasPrefix(r.Reason, want) {
			t.Fatalf("the slow prune's record in the trail says %q; it removed %d", r.Reason, o.res.Removed)
		}
	}
}

// pruneBatchSize is how many records a prune removes in one transaction.
const pruneBatchSize = 100

// batchGate holds the prune batch (a Txn that deletes) a test names, on
// the backend whose client it intercepts, until the test resumes it.
type batchGate struct {
	left         atomic.Int32 // batches to let through before holding one; 0: disarmed
	held, resume chan struct{}
}

func newBatchGate() *batchGate {
	return &batchGate{held: make(chan struct{}), resume: make(chan struct{})}
}

// hold arms g to hold the batch after the first n batches.
func (g *batchGate) hold(n int32) { g.left.Store(n + 1) }

func (g *batchGate) option() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) {
			if g.left.Load() > 0 && g.left.Add(-1) == 0 {
				close(g.held)
				select {
				case <-g.resume:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// deletes reports whether txn's success branch deletes a key.
func deletes(txn *pb.TxnRequest) bool {
	for _, op := range txn.Success {
		if op.GetRequestDeleteRange() != nil {
			return true
		}
	}
	return false
}

// TestPruneSameRequestIDAtOnce: two prunes with one request id run at
// once, the trail holding more than one batch (100) of records older than
// the cut-off. Exactly one of them removes records, and its record (the
// only prune record under that id) counts every record removed; the other
// answers as a retry of a used id does (invalid), having removed nothing.
// Before, the first removed a batch, the other removed the rest and wrote
// the prune's record counting only those, and the first then answered
// invalid: no record counted its removals, and the caller who removed
// them was told its request was invalid. Two overlaps: the second prune
// starts while the first is held between its batches, and the second,
// having read the trail, sends its first batch while the first is held so.
func TestPruneSameRequestIDAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// secondHeldFirst: the second prune is held before its first batch
		// until the first prune's first batch committed.
		secondHeldFirst bool
	}{
		{name: "second starts between the first's batches"},
		{name: "second's first batch meets the first's", secondHeldFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := etcdcluster.Shared(t).Prefix(t)
			firstGate, secondGate := newBatchGate(), newBatchGate()
			first := open(t, clockJudged(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, firstGate.option())))
			second := open(t, clockJudged(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, secondGate.option())))
			ctx := t.Context()
			const records = 150 // two batches
			rt := protocol.New(second, nil)
			for i := range records {
				if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: time.Millisecond}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(10 * time.Millisecond) // the leases have ended
			req := audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune-once"}
			type outcome struct {
				res audit.PruneResult
				err error
			}
			run := func(b *etcd.Backend) chan outcome {
				done := make(chan outcome, 1)
				go func() {
					res, err := b.PruneAudit(ctx, req)
					done <- outcome{res, err}
				}()
				return done
			}
			await := func(g *batchGate, done chan outcome, who string) {
				t.Helper()
				select {
				case <-g.held:
				case o := <-done:
					t.Fatalf("the %s prune ended before the batch it was to be held at: %+v", who, o)
				}
			}
			var secondDone chan outcome
			if tc.secondHeldFirst {
				secondGate.hold(0)
				secondDone = run(second)
				await(secondGate, secondDone, "second")
			}
			firstGate.hold(1)
			firstDone := run(first)
			await(firstGate, firstDone, "first")
			if tc.secondHeldFirst {
				close(secondGate.resume)
			} else {
				secondDone = run(second)
			}
			o2 := <-secondDone
			close(firstGate.resume)
			o1 := <-firstDone

			_, left, err := first.Counts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			page, err := first.ReadAudit(ctx, audit.Query{Ops: []protocol.Op{audit.OpPrune}})
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, r := range page.Records {
				// Its earlier batches' records (ids of their own) count the
				// prune so far: the one under its id counts it whole.
				if r.RequestID == req.RequestID {
					reasons = append(reasons, r.Reason)
				}
			}
			t.Logf("first prune: removed %d, %v; second prune: removed %d, %v; prune records %q; %d records left",
				o1.res.Removed, o1.err, o2.res.Removed, o2.err, reasons, left)
			want := fmt.Sprintf("removed %d records before", records)
			if len(reasons) != 1 || !strings.HasPrefix(reasons[0], want) {
				t.Fatalf("the trail's prune records say %q; want one, beginning %q (%d records were removed: %d by the first prune, %d by the second)",
					reasons, want, records+1-left, o1.res.Removed, o2.res.Removed)
			}
			won, lost := o1, o2
			if o1.err != nil {
				won, lost = o2, o1
			}
			if won.err != nil || won.res.Removed != records || !strings.HasPrefix(won.res.Record.Reason, want) {
				t.Fatalf("the prune that removed records: removed %d, %v, its record says %q; want %d removed and recorded",
					won.res.Removed, won.err, won.res.Record.Reason, records)
			}
			if !errors.Is(lost.err, protocol.ErrInvalid) || !strings.Contains(lost.err.Error(), "already used") || lost.res.Removed != 0 {
				t.Fatalf("the other prune: removed %d, %v; want nothing removed and invalid (request id already used)",
					lost.res.Removed, lost.err)
			}
		})
	}
}

// TestPruneCutOffFreesItsRequestID: a prune stopped between its batches
// (its context ended) drops its claim on its request id, so that the
// prune sent again with that id runs, as on the SQL stores, and removes
// the rest, instead of being refused as a use of the id. The prune
// answers by its deadline (TestPruneAnswersByItsDeadline), so the drop may
// land after the answer: sent again at once through the same Backend, the
// prune waits for it; through another (another process), it runs once the
// claim is gone, which takes no longer than the drop's round trip. The
// drop is slowed by 500 ms, so that a retry at once meets it under way.
func TestPruneCutOffFreesItsRequestID(t *testing.T) {
	t.Parallel()
	for _, sameBackend := range []bool{true, false} {
		name := map[bool]string{true: "same backend at once", false: "another backend once the claim is gone"}[sameBackend]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			prefix := etcdcluster.Shared(t).Prefix(t)
			gate := newBatchGate()
			// The claim's deletion (a Txn deleting only the claim) takes
			// 500 ms more, so that a retry sent at once meets it under way.
			slowDrop := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if txn, ok := req.(*pb.TxnRequest); ok && len(txn.Success) == 1 && strings.Contains(string(txn.Success[0].GetRequestDeleteRange().GetKey()), "\x01claim\x01") {
					time.Sleep(500 * time.Millisecond)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})
			first := open(t, clockJudged(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, gate.option(), slowDrop)))
			again := open(t, clockJudged(&etcd.Config{Prefix: prefix}))
			ctx := t.Context()
			const records = pruneBatchSize + 50 // two batches
			rt := protocol.New(again, nil)
			for i := range records {
				if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "o", TTL: time.Millisecond}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(10 * time.Millisecond) // the leases have ended
			req := audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune-cut-off"}
			gate.hold(1)
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := first.PruneAudit(pctx, req)
				done <- err
			}()
			select {
			case <-gate.held:
			case err := <-done:
				t.Fatalf("the prune ended before its second batch: %v", err)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the prune cut off before its second batch answered no error")
			}
			retry := first
			if !sameBackend {
				retry = again
				claim := again.Prefix() + "a/\x01claim\x01" + req.RequestID
				for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
					g, err := again.Client().Get(ctx, claim, clientv3.WithCountOnly())
					if err != nil {
						t.Fatal(err)
					}
					if g.Count == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the claim %q of the prune cut off is still there 1s after it answered (its drop slowed by 500 ms); want it deleted", claim)
					}
				}
			}
			res, err := retry.PruneAudit(ctx, req)
			if err != nil || res.Removed != records-pruneBatchSize {
				t.Fatalf("the prune sent again with its request id: removed %d, %v; want the %d records left", res.Removed, err, records-pruneBatchSize)
			}
		})
	}
}

// prunedOutcome is what a prune answered.
type prunedOutcome struct {
	res audit.PruneResult
	err error
}

// racedPrunes runs two prunes of one trail at once: a slow one (on a
// client whose first Txn an interceptor holds) reads an acquire's and a
// release's records, stamped an hour ago, and is held before deleting
// them; meanwhile a fast one removes both, and the acquire retried with
// its request id finds no record of it and runs again, writing a new
// record after the prunes' cut-off. Then the slow prune goes on. It
// returns the fast prune's backend, the slow prune's outcome and the
// retried acquire's result.
func racedPrunes(t *testing.T) (*etcd.Backend, prunedOutcome, protocol.Result) {
	t.Helper()
	prefix := etcdcluster.Shared(t).Prefix(t)
	var armed atomic.Bool
	held, resume := make(chan struct{}), make(chan struct{})
	holdTxn := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" && armed.CompareAndSwap(true, false) {
			close(held)
			select {
			case <-resume:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	// The records are stamped an hour ago until the prunes start.
	var skew atomic.Int64
	skew.Store(int64(time.Hour))
	stamps := func() time.Time { return time.Now().Add(-time.Duration(skew.Load())) }
	slow := open(t, etcd.WithStampClock(etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, holdTxn), stamps))
	fast := open(t, etcd.WithStampClock(&etcd.Config{Prefix: prefix}, stamps))
	ctx := t.Context()
	acquire := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "retried"}
	res, err := fast.Acquire(ctx, acquire)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fast.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, RequestID: "release"}); err != nil {
		t.Fatal(err)
	}
	skew.Store(0)
	cut := time.Now().Add(-30 * time.Minute)

	armed.Store(true)
	slowDone := make(chan prunedOutcome, 1)
	go func() {
		res, err := slow.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "slow-prune"})
		slowDone <- prunedOutcome{res, err}
	}()
	select {
	case <-held: // the slow prune read both records and is about to delete them
	case o := <-slowDone:
		t.Fatalf("the slow prune ended before its transaction: %+v", o)
	}
	if res, err := fast.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "fast-prune"}); err != nil || res.Removed != 2 {
		t.Fatalf("the fast prune: removed %d, %v; want 2", res.Removed, err)
	}
	// The retry finds no record of its request id: it runs again.
	again, err := fast.Acquire(ctx, acquire)
	if err != nil || again.Status != protocol.StatusAcquired || again.Replayed {
		t.Fatalf("the retried acquire: %+v %v; want acquired anew", again, err)
	}
	close(resume)
	o := <-slowDone
	if o.err != nil {
		t.Fatalf("the slow prune: %v", o.err)
	}
	return fast, o, again
}
