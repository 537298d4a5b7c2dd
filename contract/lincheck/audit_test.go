package lincheck_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A request id may come back in several operations of a history (a caller
// that retries an unknown outcome as a new operation, with the same id):
// they share its one record. CheckAudit judges them together, and still
// fails on a second record or a missing one.
func TestCheckAuditRequestIDsAcrossOperations(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	key := protocol.Key{Namespace: "ns", Name: "k"}
	req := protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute, RequestID: "retried"}
	res, err := rt.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	acquire := lincheck.Request{Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "w", TTL: time.Minute, RequestID: "retried"}
	lost := lincheck.Operation{Process: "p", Client: 0, Request: acquire, Start: 1, End: 2,
		Outcome: &lincheck.Outcome{Status: protocol.StatusTimeout}}
	replayed := lincheck.Operation{Process: "p", Client: 0, Request: acquire, Start: 3, End: 4,
		Outcome: &lincheck.Outcome{Status: protocol.StatusAcquired, Replayed: true, Lease: lincheck.LeaseOf(res.Lease)}}
	h := &lincheck.History{Ops: []lincheck.Operation{lost, replayed}}
	if err := lincheck.CheckAudit(t.Context(), h, b); err != nil {
		t.Fatalf("an unknown acquire and its replay, one record: %v", err)
	}

	// A second record under that id (another acquire's, here of a key the
	// history does not hold) and an effect without a record still fail.
	other := protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k2"}, Owner: "w", TTL: time.Minute, RequestID: "other"}
	if _, err := rt.Acquire(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	withOther := &lincheck.History{Ops: []lincheck.Operation{lost, replayed, replayed}}
	withOther.Ops[2].RequestID, withOther.Ops[2].Key = "other", "k2"
	withOther.Ops[2].Outcome = &lincheck.Outcome{Status: protocol.StatusAcquired, Lease: &lincheck.Lease{Owner: "w", Token: 99}}
	if err := lincheck.CheckAudit(t.Context(), withOther, b); !errors.Is(err, lincheck.ErrAuditMismatch) {
		t.Fatalf("a record with the wrong token: %v, want %v", err, lincheck.ErrAuditMismatch)
	}
	missing := &lincheck.History{Ops: []lincheck.Operation{lost, replayed, replayed}}
	missing.Ops[2].RequestID = "never-recorded"
	if err := lincheck.CheckAudit(t.Context(), missing, b); !errors.Is(err, lincheck.ErrAuditMismatch) {
		t.Fatalf("an acquire with no record: %v, want %v", err, lincheck.ErrAuditMismatch)
	}
}

// fixedTrail is an audit.Reader answering one page of fixed records.
type fixedTrail []audit.Record

func (f fixedTrail) ReadAudit(_ context.Context, q audit.Query) (audit.Page, error) {
	var out []audit.Record
	for _, r := range f {
		if q.Matches(r) {
			out = append(out, r)
		}
	}
	return audit.Page{Records: out}, nil
}

// The records of one key are in the order its changes happened
// (DESIGN.md): a trail whose ids put a change before one that returned
// earlier fails; changes that overlapped in time may be in either order.
func TestCheckAuditKeepsAKeysOrder(t *testing.T) {
	t.Parallel()
	rq := func(op protocol.Op, owner string, token int64, id string) lincheck.Request {
		return lincheck.Request{Op: op, Namespace: "ns", Key: "k", Owner: owner, Token: token, TTL: time.Minute, RequestID: id}
	}
	acquired := func(owner string, token int64) *lincheck.Outcome {
		return &lincheck.Outcome{Status: protocol.StatusAcquired, Lease: &lincheck.Lease{Owner: owner, Token: token}}
	}
	// acquire by a, release by a, acquire by b, one after another;
	// acquire by c (an unknown outcome) overlaps all of them.
	h := &lincheck.History{Ops: []lincheck.Operation{
		{Process: "p", Request: rq(protocol.OpAcquire, "a", 0, "r1"), Start: ms(10), End: ms(20), Outcome: acquired("a", 1)},
		{Process: "p", Request: rq(protocol.OpRelease, "a", 1, "r2"), Start: ms(30), End: ms(40),
			Outcome: &lincheck.Outcome{Status: protocol.StatusReleased, Lease: &lincheck.Lease{Owner: "a", Token: 1}}},
		{Process: "p", Request: rq(protocol.OpAcquire, "b", 0, "r3"), Start: ms(50), End: ms(60), Outcome: acquired("b", 2)},
		{Process: "q", Request: rq(protocol.OpAcquire, "c", 0, "r4"), Start: ms(5), End: ms(70),
			Outcome: &lincheck.Outcome{Status: protocol.StatusTimeout}},
	}}
	rec := func(id int64, op protocol.Op, st protocol.Status, owner string, token int64, req string) audit.Record {
		return audit.Record{ID: id, Op: op, Status: st, Namespace: "ns", Key: "k", Owner: owner, Actor: owner, Token: token,
			RequestID: req, Version: 1}
	}
	acqA := func(id int64) audit.Record { return rec(id, protocol.OpAcquire, protocol.StatusAcquired, "a", 1, "r1") }
	relA := func(id int64) audit.Record { return rec(id, protocol.OpRelease, protocol.StatusReleased, "a", 1, "r2") }
	acqB := func(id int64) audit.Record { return rec(id, protocol.OpAcquire, protocol.StatusAcquired, "b", 2, "r3") }
	acqC := func(id int64) audit.Record { return rec(id, protocol.OpAcquire, protocol.StatusAcquired, "c", 3, "r4") }
	for name, c := range map[string]struct {
		trail fixedTrail
		ok    bool
	}{
		"in order":                           {fixedTrail{acqA(1), relA(2), acqB(3)}, true},
		"an overlapping change first":        {fixedTrail{acqC(1), acqA(2), relA(3), acqB(4)}, true},
		"an overlapping change last":         {fixedTrail{acqA(1), relA(2), acqB(3), acqC(4)}, true},
		"reversed":                           {fixedTrail{acqB(1), relA(2), acqA(3)}, false},
		"a release before its acquire":       {fixedTrail{relA(1), acqA(2), acqB(3)}, false},
		"the last change between the others": {fixedTrail{acqA(1), acqB(2), relA(3)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := lincheck.CheckAudit(t.Context(), h, c.trail)
			switch {
			case c.ok && err != nil:
				t.Fatalf("CheckAudit: %v", err)
			case !c.ok && !errors.Is(err, lincheck.ErrAuditMismatch):
				t.Fatalf("CheckAudit of a trail out of the order of its key's changes: %v, want ErrAuditMismatch", err)
			}
		})
	}
}

// A refusal of a retry says nothing of when its request id's record was
// made: the lost first attempt may commit after it, and after other
// changes of the key.
func TestCheckAuditOrderAfterARefusedRetry(t *testing.T) {
	t.Parallel()
	rq := func(op protocol.Op, owner string, token int64, id string) lincheck.Request {
		return lincheck.Request{Op: op, Namespace: "ns", Key: "k", Owner: owner, Token: token, TTL: time.Minute, RequestID: id}
	}
	h := &lincheck.History{Ops: []lincheck.Operation{
		{Process: "q", Request: rq(protocol.OpAcquire, "c", 0, "r1"), Start: ms(5)}, // never returned
		{Process: "q", Request: rq(protocol.OpAcquire, "c", 0, "r1"), Start: ms(10), End: ms(20),
			Outcome: &lincheck.Outcome{Status: protocol.StatusConflict, Lease: &lincheck.Lease{Owner: "d", Token: 1}}},
		{Process: "p", Request: rq(protocol.OpRelease, "d", 1, "r2"), Start: ms(30), End: ms(40),
			Outcome: &lincheck.Outcome{Status: protocol.StatusReleased, Lease: &lincheck.Lease{Owner: "d", Token: 1}}},
	}}
	trail := fixedTrail{
		{ID: 1, Op: protocol.OpRelease, Status: protocol.StatusReleased, Namespace: "ns", Key: "k", Owner: "d", Actor: "d",
			Token: 1, RequestID: "r2", Version: 1},
		{ID: 2, Op: protocol.OpAcquire, Status: protocol.StatusAcquired, Namespace: "ns", Key: "k", Owner: "c", Actor: "c",
			Token: 2, RequestID: "r1", Version: 1},
	}
	if err := lincheck.CheckAudit(t.Context(), h, trail); err != nil {
		t.Fatalf("CheckAudit of a lost acquire committed after a release that began after its refused retry: %v", err)
	}
}
