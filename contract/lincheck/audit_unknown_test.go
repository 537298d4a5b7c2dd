package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// An operation of unknown outcome may have made one record, but only the
// record of its own change: its key, its actor, the success status of its
// op. DESIGN.md has nothing but a state change write a record (a refusal
// has none), so a record under its request id that is a refusal, names
// another key or another actor is a trail that does not match the history,
// whatever the operation's outcome was.
func TestCheckAuditUnknownOutcomeRecordMustBeItsChange(t *testing.T) {
	t.Parallel()
	acq := lincheck.Request{Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "w", TTL: time.Minute, RequestID: "r1"}
	h := &lincheck.History{Ops: []lincheck.Operation{{Process: "p", Client: 0, Request: acq, Start: 1, End: 2,
		Outcome: &lincheck.Outcome{Status: protocol.StatusTimeout}}}}
	good := audit.Record{ID: 1, Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "w", Token: 7,
		RequestID: "r1", Actor: "w", Status: protocol.StatusAcquired}
	if err := lincheck.CheckAudit(t.Context(), h, fixedTrail{good}); err != nil {
		t.Fatalf("the record of the unknown acquire's change: %v", err)
	}
	bad := []struct {
		name   string
		mutate func(r *audit.Record)
	}{
		{"a refusal's record", func(r *audit.Record) { r.Status = protocol.StatusConflict }},
		{"another key's record", func(r *audit.Record) { r.Key = "other" }},
		{"another actor's record", func(r *audit.Record) { r.Actor, r.Owner = "intruder", "intruder" }},
	}
	for _, c := range bad {
		name, rec := c.name, good
		c.mutate(&rec)
		if err := lincheck.CheckAudit(t.Context(), h, fixedTrail{rec}); !errors.Is(err, lincheck.ErrAuditMismatch) {
			t.Errorf("%s (%s %s of %s by %s) under an unknown acquire's request id: CheckAudit answered %v, want %v",
				name, rec.Op, rec.Status, rec.Key, rec.Actor, err, lincheck.ErrAuditMismatch)
		}
	}
}
