package contract

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// TTLs the cases use. They are whole milliseconds, so every expiry is
// exact at the SQL backends' microsecond precision.
const (
	leaseTTL = 10 * time.Second
	renewTTL = 25 * time.Second
)

// precision is the stored precision of times. A lease is live until
// expires_at - precision and expired at expires_at: the cases check both
// instants, so that a backend judging expiry early by less than a
// millisecond fails (it passed when they checked expires_at - MinTTL).
const precision = time.Microsecond

// sameInstant compares two times at the stored precision.
func sameInstant(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// fmtLease formats a lease for failure messages.
func fmtLease(l *protocol.Lease) string {
	if l == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{%s owner=%q token=%d acquired=%s renewed=%s expires=%s v%d}",
		l.Key, l.Owner, l.Token, l.AcquiredAt.UTC().Format(time.RFC3339Nano),
		l.RenewedAt.UTC().Format(time.RFC3339Nano), l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.Version)
}

// expect checks that an operation answered want: the result's status, a nil
// error for a success, and otherwise an error that matches want's sentinel
// and is an *protocol.Error with status want carrying the result's lease.
// It stops the test on a mismatch.
func (e *env) expect(what string, res protocol.Result, err error, want protocol.Status) protocol.Result {
	e.t.Helper()
	if res.Status != want {
		e.t.Fatalf("%s: status %q, want %q (message %q, error %v, lease %s)",
			what, res.Status, want, res.Message, err, fmtLease(res.Lease))
	}
	e.checkErr(what, err, want, res.Lease)
	return res
}

// checkErr checks err against status want as [env.expect] describes.
func (e *env) checkErr(what string, err error, want protocol.Status, lease *protocol.Lease) {
	e.t.Helper()
	if want.Success() {
		if err != nil {
			e.t.Fatalf("%s: status %q with error %v, want a nil error", what, want, err)
		}
		return
	}
	if !errors.Is(err, want.Sentinel()) {
		e.t.Fatalf("%s: error %v does not match %v", what, err, want.Sentinel())
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		e.t.Fatalf("%s: error %T %v is not a *protocol.Error", what, err, err)
	}
	if pe.Status != want {
		e.t.Fatalf("%s: error status %q, want %q", what, pe.Status, want)
	}
	if (pe.Lease == nil) != (lease == nil) || (lease != nil && *pe.Lease != *lease) {
		e.t.Fatalf("%s: error carries lease %s, result carries %s", what, fmtLease(pe.Lease), fmtLease(lease))
	}
}

// expectLease checks every field of got against want.
func (e *env) expectLease(what string, got *protocol.Lease, want protocol.Lease) {
	e.t.Helper()
	if got == nil {
		e.t.Fatalf("%s: no lease, want %s", what, fmtLease(&want))
	}
	if got.Key != want.Key || got.Owner != want.Owner || got.Token != want.Token ||
		!sameInstant(got.AcquiredAt, want.AcquiredAt) || !sameInstant(got.RenewedAt, want.RenewedAt) ||
		!sameInstant(got.ExpiresAt, want.ExpiresAt) || got.Version != want.Version {
		e.t.Fatalf("%s: lease %s, want %s", what, fmtLease(got), fmtLease(&want))
	}
}

// expectHolder checks the identity of a lease carried by a result: key,
// owner, token and expiry.
func (e *env) expectHolder(what string, got *protocol.Lease, want protocol.Lease) {
	e.t.Helper()
	if got == nil {
		e.t.Fatalf("%s: no lease, want %s", what, fmtLease(&want))
	}
	if got.Key != want.Key || got.Owner != want.Owner || got.Token != want.Token || !sameInstant(got.ExpiresAt, want.ExpiresAt) {
		e.t.Fatalf("%s: lease %s, want %s", what, fmtLease(got), fmtLease(&want))
	}
}

// expectNoLease checks that a result carries no lease.
func (e *env) expectNoLease(what string, got *protocol.Lease) {
	e.t.Helper()
	if got != nil {
		e.t.Fatalf("%s: lease %s, want none", what, fmtLease(got))
	}
}

// acquireReq returns an acquire request with a fresh request id.
func (e *env) acquireReq(name, owner string, ttl time.Duration) protocol.AcquireRequest {
	return protocol.AcquireRequest{Key: e.key(name), Owner: owner, TTL: ttl, RequestID: e.rid()}
}

// acquire takes a lease through rt, checks the whole result and returns the lease.
func (e *env) acquire(rt *protocol.Runtime, name, owner string, ttl time.Duration) protocol.Lease {
	e.t.Helper()
	return e.acquireWith(rt, e.acquireReq(name, owner, ttl))
}

// acquireWith runs req through rt and checks that it took a fresh lease at
// the clock's now.
func (e *env) acquireWith(rt *protocol.Runtime, req protocol.AcquireRequest) protocol.Lease {
	e.t.Helper()
	now := e.clock.Now()
	res, err := rt.Acquire(e.ctx, req)
	what := fmt.Sprintf("acquire %s by %s", req.Key, req.Owner)
	e.expect(what, res, err, protocol.StatusAcquired)
	if res.Replayed {
		e.t.Fatalf("%s: replayed, want a fresh acquire", what)
	}
	if res.RequestID != req.RequestID {
		e.t.Fatalf("%s: request id %q, want %q", what, res.RequestID, req.RequestID)
	}
	if res.Lease == nil || res.Lease.Token <= 0 {
		e.t.Fatalf("%s: lease %s, want a positive token", what, fmtLease(res.Lease))
	}
	e.expectLease(what, res.Lease, protocol.Lease{
		Key: req.Key, Owner: req.Owner, Token: res.Lease.Token,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(req.TTL), Version: protocol.LeaseFormatVersion,
	})
	return *res.Lease
}

// release gives up l through rt and checks the result.
func (e *env) release(rt *protocol.Runtime, l protocol.Lease) {
	e.t.Helper()
	res, err := rt.Release(e.ctx, protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()})
	e.expect(fmt.Sprintf("release %s token %d", l.Key, l.Token), res, err, protocol.StatusReleased)
	e.expectHolder("released lease", res.Lease, l)
}

// revoke revokes whatever lease is live at name through rt.
func (e *env) revoke(rt *protocol.Runtime, name string) protocol.Result {
	e.t.Helper()
	res, err := rt.Revoke(e.ctx, protocol.RevokeRequest{Key: e.key(name), Actor: "operator", Reason: "contract", RequestID: e.rid()})
	return e.expect("revoke "+name, res, err, protocol.StatusRevoked)
}

// get reads the live lease at name through rt: nil for not_found.
func (e *env) get(rt *protocol.Runtime, name string) *protocol.Lease {
	e.t.Helper()
	return e.getKey(rt, e.key(name))
}

// getKey reads the live lease at k through rt: nil for not_found.
func (e *env) getKey(rt *protocol.Runtime, k protocol.Key) *protocol.Lease {
	e.t.Helper()
	res, err := rt.Get(e.ctx, protocol.GetRequest{Key: k})
	if res.Status == protocol.StatusNotFound {
		e.checkErr("get "+k.String(), err, protocol.StatusNotFound, res.Lease)
		e.expectNoLease("get "+k.String(), res.Lease)
		return nil
	}
	e.expect("get "+k.String(), res, err, protocol.StatusFound)
	if res.Lease == nil {
		e.t.Fatalf("get %s: found without a lease", k)
	}
	return res.Lease
}

// row returns the stored row at name, live or expired, read with list
// (include_expired); nil when there is none.
func (e *env) row(name string) *protocol.Lease {
	e.t.Helper()
	for _, l := range e.listAll(e.a, protocol.ListRequest{Namespace: e.ns, Prefix: name, IncludeExpired: true}) {
		if l.Key.Name == name {
			return &l
		}
	}
	return nil
}

// list runs one list request through rt and checks that it answered found.
func (e *env) list(rt *protocol.Runtime, req protocol.ListRequest) protocol.ListResult {
	e.t.Helper()
	res, err := rt.List(e.ctx, req)
	if err != nil || res.Status != protocol.StatusFound {
		e.t.Fatalf("list %+v: status %q, error %v", req, res.Status, err)
	}
	return res
}

// listAll walks every page of req through rt and returns the leases.
func (e *env) listAll(rt *protocol.Runtime, req protocol.ListRequest) []protocol.Lease {
	e.t.Helper()
	var all []protocol.Lease
	for range 10_000 {
		res := e.list(rt, req)
		all = append(all, res.Leases...)
		if res.NextCursor == "" {
			return all
		}
		req.Cursor = res.NextCursor
	}
	e.t.Fatalf("list %+v: more than 10000 pages", req)
	return nil
}

// names returns the names of leases, in order.
func names(ls []protocol.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Key.Name
	}
	return out
}

// readAudit reads one audit page and stops the test on an error.
func (e *env) readAudit(q audit.Query) audit.Page {
	e.t.Helper()
	p, err := e.audit.ReadAudit(e.ctx, q)
	if err != nil {
		e.t.Fatalf("read audit %+v: %v", q, err)
	}
	return p
}

// auditAll walks every page of q and returns the records.
func (e *env) auditAll(q audit.Query) []audit.Record {
	e.t.Helper()
	var all []audit.Record
	for range 10_000 {
		p := e.readAudit(q)
		all = append(all, p.Records...)
		if p.NextCursor == "" {
			return all
		}
		q.Cursor = p.NextCursor
	}
	e.t.Fatalf("read audit %+v: more than 10000 pages", q)
	return nil
}

// auditCount returns the number of audit records in every namespace.
func (e *env) auditCount() int {
	e.t.Helper()
	return len(e.auditAll(audit.Query{}))
}

// state is a snapshot of what a failed operation must leave untouched: the
// stored row at one name and the size of the audit trail.
type state struct {
	name    string
	row     *protocol.Lease
	records int
}

// snapshot records the state around name.
func (e *env) snapshot(name string) state {
	e.t.Helper()
	return state{name: name, row: e.row(name), records: e.auditCount()}
}

// unchanged checks that the row at s.name and the audit trail are as s
// recorded them.
func (e *env) unchanged(what string, s state) {
	e.t.Helper()
	now := e.row(s.name)
	switch {
	case s.row == nil && now != nil:
		e.t.Fatalf("%s: row %s appeared", what, fmtLease(now))
	case s.row != nil && now == nil:
		e.t.Fatalf("%s: row %s disappeared", what, fmtLease(s.row))
	case s.row != nil:
		e.expectLease(what+": row", now, *s.row)
	}
	if n := e.auditCount(); n != s.records {
		e.t.Fatalf("%s: %d audit records, want %d (nothing written)", what, n, s.records)
	}
}
