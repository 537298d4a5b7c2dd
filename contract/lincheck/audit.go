package lincheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
//   - an operation of unknown outcome has at most one, the record of its
//     change had it taken effect: of its op and that op's success status,
//     its key, its owner as actor, and the lease owner and token its
//     request names (the owner of an acquire, renew or release; the token
//     of a renew, a release, and a revoke naming one);
//   - every record of those namespaces belongs to an operation of h;
//   - the records of one key are in the order its changes happened: a
//     record certainly made before another began (its operation, or a
//     replay of it, returned before the other's first operation began,
//     with [ClockSlack] either side) has the lower id.
//
// A request id sent by several operations (a caller that retries an
// unknown outcome as a new operation) is judged for them together: those
// that took effect, replays included, share its one record.
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
	var ids []string
	byOp := map[string][]Operation{}
	for _, op := range h.Ops {
		id := op.Namespace + "\x00" + op.RequestID
		if byOp[id] == nil {
			ids = append(ids, id)
		}
		byOp[id] = append(byOp[id], op)
	}
	var made []madeRecord
	for _, id := range ids {
		recs := byID[id]
		delete(byID, id)
		for _, m := range auditMismatches(byOp[id], recs) {
			problems = append(problems, fmt.Sprintf("%s %s/%s request %s (%s): %s",
				m.op.Op, m.op.Namespace, m.op.Key, m.op.RequestID, describeOutcome(m.op.Outcome), m.why))
		}
		if len(recs) == 1 {
			made = append(made, madeWithin(recs[0], byOp[id]))
		}
	}
	problems = append(problems, orderProblems(made)...)
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

// madeRecord is a record and the span in which it was made: not before
// the first operation of its request id began, not after the first of
// them that took effect returned (latest is MaxInt64 when none did).
type madeRecord struct {
	rec              audit.Record
	earliest, latest int64
}

// madeWithin returns rec's span, given the operations of its request id.
func madeWithin(rec audit.Record, ops []Operation) madeRecord {
	m := madeRecord{rec: rec, earliest: math.MaxInt64, latest: math.MaxInt64}
	for _, op := range ops {
		m.earliest = min(m.earliest, op.Start)
		// Only an answer that the change took effect says the record was
		// there: a refusal of a retry may come before a lost first attempt
		// commits.
		if !op.Unknown() && op.End != 0 && tookEffect(op.Outcome.Status) {
			m.latest = min(m.latest, op.End)
		}
	}
	return m
}

// orderProblems says which records of one key were certainly made after a
// record with a greater id (by more than ClockSlack): a trail that puts a
// key's changes out of the order they happened in.
func orderProblems(made []madeRecord) []string {
	byKey := map[string][]madeRecord{}
	for _, m := range made {
		k := m.rec.Namespace + "\x00" + m.rec.Key
		byKey[k] = append(byKey[k], m)
	}
	var problems []string
	for _, recs := range byKey {
		slices.SortFunc(recs, func(a, b madeRecord) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
		// From the greatest id down: first, the record of a greater id
		// that was made first.
		first := -1
		for i := len(recs) - 1; i >= 0; i-- {
			m := recs[i]
			if first >= 0 && recs[first].latest < math.MaxInt64-slack && recs[first].latest+slack < m.earliest {
				f := recs[first]
				problems = append(problems, fmt.Sprintf("key %s/%s: record %d (%s %s, request %s) was made before record %d "+
					"(%s %s, request %s) began, but has the greater id", m.rec.Namespace, m.rec.Key, f.rec.ID, f.rec.Op,
					f.rec.Status, f.rec.RequestID, m.rec.ID, m.rec.Op, m.rec.Status, m.rec.RequestID))
			}
			if first < 0 || m.latest < recs[first].latest {
				first = i
			}
		}
	}
	return problems
}

// tookEffect reports whether an operation answered s made its change
// (replayed or not).
func tookEffect(s protocol.Status) bool {
	switch s {
	case protocol.StatusAcquired, protocol.StatusRenewed, protocol.StatusReleased, protocol.StatusRevoked:
		return true
	}
	return false
}

// mismatch is what is wrong with the records of op's request id.
type mismatch struct {
	op  Operation
	why string
}

// auditMismatches says what is wrong with recs, the records of one request
// id, given ops, the operations that sent it (in history order): nothing
// when it is nil. The operations that took effect under an id (a replay
// included) share its one record; one that was refused, or a get, adds
// none; one of unknown outcome may have made it.
func auditMismatches(ops []Operation, recs []audit.Record) []mismatch {
	var effective, unknown []Operation
	for _, op := range ops {
		switch {
		case op.Op == protocol.OpGet:
		case op.Unknown():
			unknown = append(unknown, op)
		case tookEffect(op.Outcome.Status):
			effective = append(effective, op)
		}
	}
	switch {
	case len(effective) == 0 && len(unknown) == 0:
		if len(recs) > 0 {
			return []mismatch{{ops[0], fmt.Sprintf("%d records (%s %s first) for an operation that changed nothing",
				len(recs), recs[0].Op, recs[0].Status)}}
		}
		return nil
	case len(recs) > 1:
		return []mismatch{{ops[0], fmt.Sprintf("%d records, want one", len(recs))}}
	case len(effective) == 0:
		if len(recs) == 0 {
			return nil
		}
		// The record must be the change of one of them.
		var first string
		for _, op := range unknown {
			why := unknownRecordMismatch(op, recs[0])
			if why == "" {
				return nil
			}
			if first == "" {
				first = why
			}
		}
		return []mismatch{{unknown[0], first}}
	case len(recs) == 0:
		return []mismatch{{effective[0], "no record of a change that took effect"}}
	}
	var found []mismatch
	for _, op := range effective {
		if why := recordMismatch(op, recs[0]); why != "" {
			found = append(found, mismatch{op, why})
		}
	}
	return found
}

// recordMismatch says how rec differs from the record of op, an operation
// that took effect, or "" when it does not.
func recordMismatch(op Operation, rec audit.Record) string {
	out := op.Outcome
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

// successStatus is the status of op's change when it takes effect.
func successStatus(op protocol.Op) protocol.Status {
	switch op {
	case protocol.OpAcquire:
		return protocol.StatusAcquired
	case protocol.OpRenew:
		return protocol.StatusRenewed
	case protocol.OpRelease:
		return protocol.StatusReleased
	case protocol.OpRevoke:
		return protocol.StatusRevoked
	}
	return ""
}

// unknownRecordMismatch says how rec differs from the record op, an
// operation of unknown outcome, makes if it takes effect, or "" when it
// does not: its op and that op's success status, its key, its actor, and
// what the request fixes of the lease (the owner of an acquire, renew or
// release; the token of a renew or release, and of a revoke naming one).
func unknownRecordMismatch(op Operation, rec audit.Record) string {
	var want []string
	if success := successStatus(op.Op); rec.Op != op.Op || rec.Status != success {
		want = append(want, fmt.Sprintf("%s %s, want %s %s", rec.Op, rec.Status, op.Op, success))
	}
	if rec.Key != op.Key {
		want = append(want, fmt.Sprintf("key %q, want %q", rec.Key, op.Key))
	}
	if rec.Actor != op.Owner {
		want = append(want, fmt.Sprintf("actor %q, want %q", rec.Actor, op.Owner))
	}
	if op.Op != protocol.OpRevoke && rec.Owner != op.Owner {
		want = append(want, fmt.Sprintf("lease owner %q, want %q", rec.Owner, op.Owner))
	}
	if (op.Op == protocol.OpRenew || op.Op == protocol.OpRelease || op.Op == protocol.OpRevoke && op.Token != 0) &&
		rec.Token != op.Token {
		want = append(want, fmt.Sprintf("token %d, want %d", rec.Token, op.Token))
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
