package lincheck

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// ErrAuditMismatch is returned by [CheckAudit] when the audit trail does not
// match the history.
var ErrAuditMismatch = errors.New("lincheck: the audit trail does not match the history")

// CheckAudit checks the audit trail that r reads against h, after the run:
// DESIGN.md has each state change write its record in the same atomic step,
// and nothing else write one. So, by request id, within the namespaces
// of h's operations:
//
//   - an operation that took effect (acquired, renewed, released or
//     revoked, replayed or not) has exactly one record, of its op and
//     status, carrying the lease its result carried (key, owner, token),
//     and its owner (the actor, for a revoke) as actor;
//   - a refusal (conflict, not_found, stale_token, not_owner, expired)
//     and a get have none;
//   - an operation of unknown outcome has at most one, of its op;
//   - every record of those namespaces belongs to an operation of h.
//
// It needs the whole history of every writer of those namespaces, and a
// trail nobody pruned since the run began.
func CheckAudit(ctx context.Context, h *History, r audit.Reader) error {
	byID := map[string][]audit.Record{}
	namespaces := map[string]bool{}
	for _, op := range h.Ops {
		if namespaces[op.Namespace] {
			continue
		}
		namespaces[op.Namespace] = true
		q := audit.Query{Namespace: op.Namespace, Limit: audit.MaxLimit}
		for {
			p, err := r.ReadAudit(ctx, q)
			if err != nil {
				return fmt.Errorf("lincheck: read the audit trail of %q: %w", op.Namespace, err)
			}
			for _, rec := range p.Records {
				byID[rec.Namespace+"\x00"+rec.RequestID] = append(byID[rec.Namespace+"\x00"+rec.RequestID], rec)
			}
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
	}
	var problems []string
	for _, op := range h.Ops {
		id := op.Namespace + "\x00" + op.RequestID
		recs := byID[id]
		delete(byID, id)
		if why := auditMismatch(op, recs); why != "" {
			problems = append(problems, fmt.Sprintf("%s %s/%s request %s (%s): %s",
				op.Op, op.Namespace, op.Key, op.RequestID, describeOutcome(op.Outcome), why))
		}
	}
	for _, recs := range byID {
		for _, rec := range recs {
			problems = append(problems, fmt.Sprintf("record %d (%s %s of %s/%s, request %s) belongs to no operation",
				rec.ID, rec.Op, rec.Status, rec.Namespace, rec.Key, rec.RequestID))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	n := len(problems)
	if n > 10 {
		problems = append(problems[:10], fmt.Sprintf("and %d more", n-10))
	}
	return fmt.Errorf("%w: %d problems:\n\t%s", ErrAuditMismatch, n, strings.Join(problems, "\n\t"))
}

// auditMismatch says what is wrong with recs, the records of op's request
// id, or "" when nothing is.
func auditMismatch(op Operation, recs []audit.Record) string {
	took := map[protocol.Status]bool{protocol.StatusAcquired: true, protocol.StatusRenewed: true,
		protocol.StatusReleased: true, protocol.StatusRevoked: true}
	switch {
	case op.Op == protocol.OpGet || (!op.Unknown() && !took[op.Outcome.Status]):
		if len(recs) > 0 {
			return fmt.Sprintf("%d records (%s %s first) for an operation that changed nothing", len(recs), recs[0].Op, recs[0].Status)
		}
		return ""
	case len(recs) > 1:
		return fmt.Sprintf("%d records, want one", len(recs))
	case op.Unknown():
		if len(recs) == 1 && recs[0].Op != op.Op {
			return fmt.Sprintf("a record of %s", recs[0].Op)
		}
		return ""
	case len(recs) == 0:
		return "no record of a change that took effect"
	}
	rec, out := recs[0], op.Outcome
	actor := op.Owner
	var want []string
	if rec.Op != op.Op || rec.Status != out.Status {
		want = append(want, fmt.Sprintf("%s %s, want %s %s", rec.Op, rec.Status, op.Op, out.Status))
	}
	if rec.Key != op.Key {
		want = append(want, fmt.Sprintf("key %q, want %q", rec.Key, op.Key))
	}
	if rec.Actor != actor {
		want = append(want, fmt.Sprintf("actor %q, want %q", rec.Actor, actor))
	}
	if l := out.Lease; l != nil && (rec.Owner != l.Owner || rec.Token != l.Token) {
		want = append(want, fmt.Sprintf("lease %s token %d, want %s token %d", rec.Owner, rec.Token, l.Owner, l.Token))
	}
	return strings.Join(want, "; ")
}

// describeOutcome renders an outcome for a problem's line.
func describeOutcome(o *Outcome) string {
	switch {
	case o == nil:
		return "never returned"
	case o.Replayed:
		return string(o.Status) + " replayed"
	}
	return string(o.Status)
}
