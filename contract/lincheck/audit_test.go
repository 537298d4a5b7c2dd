package lincheck_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
