package contract

import (
	"fmt"
	"time"

	"github.com/leasestore/leasestore/audit"

	"github.com/leasestore/leasestore/protocol"
)

// holderOp is renew or release: an operation of the lease's holder, named by
// (key, owner, token), with DESIGN.md's precedence table.
type holderOp struct {
	name    string
	success protocol.Status
	do      func(e *env, rt *protocol.Runtime, name, owner string, token int64, requestID string) (protocol.Result, error)
	// check verifies a successful result and the state after it; before is
	// the lease acted on, as acquired.
	check func(e *env, before protocol.Lease, res protocol.Result)
}

var renewOp = holderOp{
	name:    "renew",
	success: protocol.StatusRenewed,
	do: func(e *env, rt *protocol.Runtime, name, owner string, token int64, requestID string) (protocol.Result, error) {
		return rt.Renew(e.ctx, protocol.RenewRequest{Key: e.key(name), Owner: owner, Token: token, TTL: renewTTL, RequestID: requestID})
	},
	check: func(e *env, before protocol.Lease, res protocol.Result) {
		now := e.clock.Now()
		want := before
		want.RenewedAt, want.ExpiresAt = now, now.Add(renewTTL)
		e.expectLease("renewed lease", res.Lease, want)
		e.expectLease("get after renew", e.get(e.b, before.Key.Name), want)
	},
}

var releaseOp = holderOp{
	name:    "release",
	success: protocol.StatusReleased,
	do: func(e *env, rt *protocol.Runtime, name, owner string, token int64, requestID string) (protocol.Result, error) {
		return rt.Release(e.ctx, protocol.ReleaseRequest{Key: e.key(name), Owner: owner, Token: token, RequestID: requestID})
	},
	check: func(e *env, before protocol.Lease, res protocol.Result) {
		e.expectHolder("released lease", res.Lease, before)
		if l := e.get(e.b, before.Key.Name); l != nil {
			e.t.Fatalf("get after release: %s, want not_found", fmtLease(l))
		}
		if r := e.row(before.Key.Name); r != nil {
			e.t.Fatalf("row after release: %s, want none (a released lease is not listed)", fmtLease(r))
		}
	},
}

// run calls the operation through rt with a fresh request id and checks the
// status and error.
func (op holderOp) run(e *env, rt *protocol.Runtime, name, owner string, token int64, want protocol.Status) protocol.Result {
	e.t.Helper()
	res, err := op.do(e, rt, name, owner, token, e.rid())
	e.expect(fmt.Sprintf("%s %s owner %s token %d", op.name, name, owner, token), res, err, want)
	if res.Replayed {
		e.t.Fatalf("%s: flagged replayed, want a fresh outcome", op.name)
	}
	return res
}

// refused runs the operation, expects the failure want, checks the lease it
// carries (nil when carried is nil) and that nothing changed.
func (op holderOp) refused(e *env, rt *protocol.Runtime, name, owner string, token int64, want protocol.Status, carried *protocol.Lease) {
	e.t.Helper()
	before := e.snapshot(name)
	res := op.run(e, rt, name, owner, token, want)
	if carried == nil {
		e.expectNoLease(op.name+" "+string(want), res.Lease)
	} else {
		e.expectLease(op.name+" "+string(want)+" carries the current lease", res.Lease, *carried)
	}
	e.unchanged(op.name+" "+string(want), before)
}

// holderCases covers every row of the precedence table for renew or release.
func holderCases(op holderOp) []testCase {
	return []testCase{
		{"not_found/never_held", func(e *env) {
			op.refused(e, e.a, "job", "w1", 1, protocol.StatusNotFound, nil)
		}},
		{"not_found/after_release", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, l)
			op.refused(e, e.b, "job", "w1", l.Token, protocol.StatusNotFound, nil)
		}},
		{"not_found/after_revoke", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.revoke(e.b, "job")
			op.refused(e, e.a, "job", "w1", l.Token, protocol.StatusNotFound, nil)
		}},
		{"not_found/any_token_once_ended", func(e *env) {
			// Once the key's last lease was released or revoked there is
			// no row: an older, the same or a newer token is not_found
			// (where a backend keeps the ended row, it is not a lease).
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, old)
			last := e.acquire(e.b, "job", "w2", leaseTTL)
			e.release(e.b, last)
			for _, token := range []int64{old.Token, last.Token, last.Token + 1000} {
				op.refused(e, e.a, "job", "w1", token, protocol.StatusNotFound, nil)
				op.refused(e, e.a, "job", "w2", token, protocol.StatusNotFound, nil)
			}
			revoked := e.acquire(e.b, "other", "w2", leaseTTL)
			e.revoke(e.a, "other")
			for _, token := range []int64{revoked.Token - 1, revoked.Token, revoked.Token + 1000} {
				op.refused(e, e.a, "other", "w2", token, protocol.StatusNotFound, nil)
			}
		}},
		{"stale_token/same_owner", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, old)
			cur := e.acquire(e.b, "job", "w1", leaseTTL)
			op.refused(e, e.a, "job", "w1", old.Token, protocol.StatusStaleToken, &cur)
		}},
		{"stale_token/before_not_owner", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			cur := e.acquire(e.b, "job", "w2", leaseTTL)
			// An older token answers stale_token whoever asks.
			op.refused(e, e.a, "job", "w1", old.Token, protocol.StatusStaleToken, &cur)
			op.refused(e, e.a, "job", "w2", old.Token, protocol.StatusStaleToken, &cur)
			op.refused(e, e.b, "job", "w3", old.Token, protocol.StatusStaleToken, &cur)
		}},
		{"stale_token/before_expired", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, old)
			cur := e.acquire(e.b, "job", "w2", leaseTTL)
			e.clock.Advance(2 * leaseTTL) // the current lease expired too
			op.refused(e, e.a, "job", "w1", old.Token, protocol.StatusStaleToken, &cur)
		}},
		{"not_owner/other_owner", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			op.refused(e, e.b, "job", "w2", cur.Token, protocol.StatusNotOwner, &cur)
		}},
		{"not_owner/newer_token", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			op.refused(e, e.b, "job", "w1", cur.Token+1, protocol.StatusNotOwner, &cur)
			op.refused(e, e.a, "job", "w2", cur.Token+1000, protocol.StatusNotOwner, &cur)
		}},
		{"not_owner/before_expired", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			op.refused(e, e.b, "job", "w2", cur.Token, protocol.StatusNotOwner, &cur)
			op.refused(e, e.b, "job", "w1", cur.Token+1, protocol.StatusNotOwner, &cur)
		}},
		{"expired", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL) // now == expires_at
			before := e.snapshot("job")
			op.run(e, e.b, "job", "w1", cur.Token, protocol.StatusExpired)
			e.unchanged(op.name+" expired", before)
			if l := e.get(e.a, "job"); l != nil {
				e.t.Fatalf("get after expiry: %s, want not_found", fmtLease(l))
			}
			next := e.acquire(e.b, "job", "w2", leaseTTL)
			if next.Token <= cur.Token {
				e.t.Fatalf("token %d after expiry, want more than %d", next.Token, cur.Token)
			}
		}},
		{"success", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(3 * time.Second)
			res := op.run(e, e.a, "job", "w1", l.Token, op.success)
			op.check(e, l, res)
		}},
		{"success/other_handle_just_before_expiry", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL - precision) // the last instant the lease is live
			res := op.run(e, e.b, "job", "w1", l.Token, op.success)
			op.check(e, l, res)
		}},
	}
}

func revokeCases() []testCase {
	revoke := func(e *env, rt *protocol.Runtime, name string, token int64, want protocol.Status) protocol.Result {
		e.t.Helper()
		res, err := rt.Revoke(e.ctx, protocol.RevokeRequest{
			Key: e.key(name), Actor: "operator", Reason: "contract", Token: token, RequestID: e.rid(),
		})
		e.expect(fmt.Sprintf("revoke %s token %d", name, token), res, err, want)
		if res.Replayed {
			e.t.Fatal("revoke flagged replayed, want a fresh outcome")
		}
		return res
	}
	refused := func(e *env, name string, token int64, want protocol.Status, carried *protocol.Lease) {
		e.t.Helper()
		before := e.snapshot(name)
		res := revoke(e, e.b, name, token, want)
		if carried == nil {
			e.expectNoLease("revoke "+string(want), res.Lease)
		} else {
			e.expectLease("revoke "+string(want)+" carries the current lease", res.Lease, *carried)
		}
		e.unchanged("revoke "+string(want), before)
	}
	return []testCase{
		{"not_found/never_held", func(e *env) {
			refused(e, "job", 0, protocol.StatusNotFound, nil)
			refused(e, "job", 7, protocol.StatusNotFound, nil)
		}},
		{"not_found/any_token_once_ended", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, old)
			last := e.acquire(e.b, "job", "w2", leaseTTL)
			e.revoke(e.a, "job")
			for _, token := range []int64{0, old.Token, last.Token, last.Token + 1000} {
				refused(e, "job", token, protocol.StatusNotFound, nil)
			}
		}},
		{"not_found/expired", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			refused(e, "job", 0, protocol.StatusNotFound, nil)
			refused(e, "job", l.Token, protocol.StatusNotFound, nil)
		}},
		{"stale_token", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.a, old)
			cur := e.acquire(e.a, "job", "w2", leaseTTL)
			refused(e, "job", old.Token, protocol.StatusStaleToken, &cur)
		}},
		{"stale_token/before_expired", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			cur := e.acquire(e.a, "job", "w2", leaseTTL)
			e.clock.Advance(leaseTTL)
			refused(e, "job", old.Token, protocol.StatusStaleToken, &cur)
		}},
		{"not_owner", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			refused(e, "job", cur.Token+1, protocol.StatusNotOwner, &cur)
		}},
		{"not_owner/before_expired", func(e *env) {
			cur := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			refused(e, "job", cur.Token+1, protocol.StatusNotOwner, &cur)
		}},
		{"success/any_token", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(time.Second)
			res := revoke(e, e.b, "job", 0, protocol.StatusRevoked)
			e.expectHolder("revoked lease", res.Lease, l)
			recs := e.auditAll(audit.Query{Namespace: e.ns, Key: "job"})
			if len(recs) != 2 {
				e.t.Fatalf("%d audit records, want acquire and revoke", len(recs))
			}
			e.expectRecord("revoke record", recs[1], audit.Record{
				At: e.clock.Now(), Op: protocol.OpRevoke, Namespace: e.ns, Key: "job", Owner: "w1", Token: l.Token,
				RequestID: res.RequestID, Actor: "operator", Reason: "contract", Status: protocol.StatusRevoked,
				Version: audit.RecordFormatVersion, ExpiresAt: l.ExpiresAt,
			})
			if g := e.get(e.a, "job"); g != nil {
				e.t.Fatalf("get after revoke: %s, want not_found", fmtLease(g))
			}
			if r := e.row("job"); r != nil {
				e.t.Fatalf("row after revoke: %s, want none (a revoked lease is not listed)", fmtLease(r))
			}
			next := e.acquire(e.a, "job", "w2", leaseTTL)
			if next.Token <= l.Token {
				e.t.Fatalf("token %d after revoke, want more than %d", next.Token, l.Token)
			}
		}},
		{"success/matching_token", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL - precision) // the last instant the lease is live
			res := revoke(e, e.a, "job", l.Token, protocol.StatusRevoked)
			e.expectHolder("revoked lease", res.Lease, l)
			if g := e.get(e.b, "job"); g != nil {
				e.t.Fatalf("get after revoke: %s, want not_found", fmtLease(g))
			}
		}},
	}
}
