package contract

import (
	"strings"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// lockDelay is the lock-delay the cases ask for.
const lockDelay = 5 * time.Second

// acquireDelayed takes a lease on name for owner with lockDelay through
// rt, and checks that the lease carries it.
func (e *env) acquireDelayed(rt *protocol.Runtime, name, owner string) protocol.Lease {
	e.t.Helper()
	req := e.acquireReq(name, owner, leaseTTL)
	req.LockDelay = lockDelay
	l := e.acquireWith(rt, req)
	if l.LockDelay != lockDelay {
		e.t.Fatalf("acquired lease has lock-delay %v, want %v", l.LockDelay, lockDelay)
	}
	return l
}

// defaultRuntimes returns runtimes over the harness's two handles whose
// namespace defaults of the lock-delay are [HandleLockDelays]'s (the
// handles' own when the harness serves them), and moves the env to a
// namespace those defaults cover.
func (e *env) defaultRuntimes() (first, second *protocol.Runtime) {
	e.ns = "contract-default-" + strings.TrimPrefix(newNamespace(), "contract-")
	if e.h.ServesLockDelays {
		return e.a, e.b
	}
	d1, d2 := HandleLockDelays()
	// Not closed: closing a runtime closes its backend, which e.a and e.b
	// own and close.
	noSweep := &protocol.SweepConfig{Every: -1}
	return protocol.New(e.h.Backend, &protocol.Config{DefaultTimeout: opTimeout, LockDelays: d1, Sweep: noSweep}),
		protocol.New(e.h.Second, &protocol.Config{DefaultTimeout: opTimeout, LockDelays: d2, Sweep: noSweep})
}

// expectDelayed checks that an acquire of name answers conflict carrying
// ended (the lease whose lock-delay keeps the key, ExpiresAt at endedAt)
// with a message saying so, and writes nothing; and that a get answers
// not_found carrying the same ended lease (see [env.expectGetDelayed]).
func (e *env) expectDelayed(what, name string, ended protocol.Lease, endedAt time.Time) {
	e.t.Helper()
	before := e.snapshot(name)
	res, err := e.b.Acquire(e.ctx, e.acquireReq(name, "w2", leaseTTL))
	e.expect(what, res, err, protocol.StatusConflict)
	ended.ExpiresAt = endedAt
	e.expectHolder(what+": the conflict carries the ended lease", res.Lease, ended)
	if res.Lease.LockDelay != lockDelay {
		e.t.Fatalf("%s: the conflict's lease has lock-delay %v, want %v", what, res.Lease.LockDelay, lockDelay)
	}
	if !res.KeptByLockDelay() {
		e.t.Fatalf("%s: message %q does not say a lock-delay keeps the key (starting %q)", what, res.Message, protocol.LockDelayPrefix)
	}
	e.unchanged(what, before)
	e.expectGetDelayed(what+": get", name, ended)
}

// expectGetDelayed checks that a get of name, whose ended lease's
// lock-delay keeps the key, answers not_found (no lease is live) carrying
// ended (ExpiresAt the time it ended, its LockDelay, FreeAt when the delay
// ends) with a message naming when the key is free.
func (e *env) expectGetDelayed(what, name string, ended protocol.Lease) {
	e.t.Helper()
	res, err := e.b.Get(e.ctx, protocol.GetRequest{Key: e.key(name)})
	e.expect(what, res, err, protocol.StatusNotFound)
	e.expectHolder(what+": not_found carries the ended lease", res.Lease, ended)
	if res.Lease.LockDelay != lockDelay || !sameInstant(res.Lease.FreeAt(), ended.ExpiresAt.Add(lockDelay)) {
		e.t.Fatalf("%s: the ended lease has lock-delay %v, free at %s; want %v, free at %s", what,
			res.Lease.LockDelay, res.Lease.FreeAt(), lockDelay, ended.ExpiresAt.Add(lockDelay))
	}
	if free := res.Lease.FreeAt().UTC().Format(time.RFC3339Nano); !strings.Contains(res.Message, "lock-delay") || !strings.Contains(res.Message, free) {
		e.t.Fatalf("%s: message %q does not say that a lock-delay keeps the key until %s", what, res.Message, free)
	}
}

// lockDelayCases check the lock-delay (DESIGN.md, contract v3): after a
// lease with one ends other than by its holder's release, acquires of the
// key answer conflict until the delay has passed; a release frees the key
// at once; the holder's answers keep DESIGN.md's precedence.
func lockDelayCases() []testCase {
	return []testCase{
		{"shown_by_get", func(e *env) {
			l := e.acquireDelayed(e.a, "job", "w1")
			if got := e.get(e.b, "job"); got.LockDelay != lockDelay {
				e.t.Fatalf("get: lock-delay %v, want %v", got.LockDelay, lockDelay)
			}
			plain := e.acquire(e.a, "other", "w1", leaseTTL)
			if plain.LockDelay != 0 || e.get(e.b, "other").LockDelay != 0 {
				e.t.Fatalf("a lease acquired without a lock-delay shows one: %v", plain.LockDelay)
			}
			e.clock.Advance(time.Second)
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: leaseTTL, RequestID: e.rid()})
			e.expect("renew", res, err, protocol.StatusRenewed)
			if res.Lease.LockDelay != lockDelay {
				e.t.Fatalf("renewed lease: lock-delay %v, want %v (a renew keeps it)", res.Lease.LockDelay, lockDelay)
			}
		}},
		{"kept_by_a_replayed_acquire", func(e *env) {
			// A retry of the acquire answers what the first attempt did,
			// lock-delay included (it answered 0 on every backend: the
			// audit record, which a replay reads, does not hold it).
			req := e.acquireReq("job", "w1", leaseTTL)
			req.LockDelay = lockDelay
			first := e.acquireWith(e.a, req)
			res, err := e.a.Acquire(e.ctx, req)
			e.expect("replayed acquire", res, err, protocol.StatusAcquired)
			if !res.Replayed || res.Lease == nil || res.Lease.Token != first.Token {
				e.t.Fatalf("replayed acquire: %+v, want a replay of token %d", res, first.Token)
			}
			if res.Lease.LockDelay != lockDelay {
				e.t.Fatalf("replayed acquire: lock-delay %v, want the first answer's %v", res.Lease.LockDelay, lockDelay)
			}
		}},
		{"retry_after_the_default_changed", func(e *env) {
			// An acquire that asks for no lock-delay takes the namespace
			// default of the runtime serving it (7s through the first
			// handle). Its retry, the same request with the same request id,
			// that reaches a runtime with another default (30s through the
			// second: a restart with another `serve --lock-delay`, or
			// another server on the store) replays the first answer,
			// lock-delay included: the default is the server's setting, not
			// a parameter of the request. A retry asking for a lock-delay
			// of its own is compared with the one the first attempt's lease
			// got: the same replays, another is invalid. Nothing is written.
			first, second := e.defaultRuntimes()
			const firstDefault = 7 * time.Second
			req := e.acquireReq("job", "w1", leaseTTL)
			l := e.acquireWith(first, req)
			if l.LockDelay != firstDefault {
				e.t.Fatalf("acquire without a lock-delay through the first handle: lock-delay %v, want its default %v", l.LockDelay, firstDefault)
			}
			before := e.snapshot("job")
			retry := func(what string, rt *protocol.Runtime, delay time.Duration, want protocol.Status) {
				e.t.Helper()
				r := req
				r.LockDelay = delay
				res, err := rt.Acquire(e.ctx, r)
				e.expect(what, res, err, want)
				e.unchanged(what, before)
				if want == protocol.StatusInvalid {
					return
				}
				if !res.Replayed || res.Lease == nil || res.Lease.Token != l.Token || res.Lease.LockDelay != l.LockDelay {
					e.t.Fatalf("%s: %+v (lease %s), want a replay of token %d with the first answer's lock-delay %v",
						what, res, fmtLease(res.Lease), l.Token, l.LockDelay)
				}
				e.expectLease(what, res.Lease, l)
			}
			retry("retry through a runtime with another default", second, 0, protocol.StatusAcquired)
			retry("retry through the first runtime", first, 0, protocol.StatusAcquired)
			retry("retry asking for the lock-delay the lease got", second, firstDefault, protocol.StatusAcquired)
			retry("retry asking for the second runtime's default", second, 30*time.Second, protocol.StatusInvalid)
			retry("retry asking for another lock-delay", first, lockDelay, protocol.StatusInvalid)

			// An acquire that asked for a lock-delay of its own (as a
			// release that filled the default in before the backend saw
			// it recorded one): a retry asking for none replays it.
			req = e.acquireReq("asked", "w1", leaseTTL)
			req.LockDelay = lockDelay
			l = e.acquireWith(second, req)
			if l.LockDelay != lockDelay {
				e.t.Fatalf("acquire asking for %v: lock-delay %v", lockDelay, l.LockDelay)
			}
			before = e.snapshot("asked")
			retry("retry asking for none of an acquire that asked for one", first, 0, protocol.StatusAcquired)
			retry("retry asking for the same", first, lockDelay, protocol.StatusAcquired)
			retry("retry asking for another", second, firstDefault, protocol.StatusInvalid)
		}},
		{"kept_by_replayed_changes", func(e *env) {
			// A retry of a renew, a release or a revoke answers the lease as
			// the first attempt did, lock-delay included, also once the key
			// has a lease of another holder (the lease row no longer holds
			// the ended lease's lock-delay).
			replayed := func(what string, first protocol.Result, again func() (protocol.Result, error)) {
				e.t.Helper()
				if first.Lease == nil || first.Lease.LockDelay != lockDelay {
					e.t.Fatalf("%s: first answer %+v, want its lease with lock-delay %v", what, first, lockDelay)
				}
				res, err := again()
				e.expectReplay("replayed "+what, res, err, first.Status)
				e.expectLease("replayed "+what+"'s lease", res.Lease, *first.Lease)
				if res.Lease.LockDelay != lockDelay {
					e.t.Fatalf("replayed %s: lock-delay %v, want the first answer's %v", what, res.Lease.LockDelay, lockDelay)
				}
			}
			l := e.acquireDelayed(e.a, "renewed", "w1")
			e.clock.Advance(time.Second)
			renew := protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: leaseTTL, RequestID: e.rid()}
			first, err := e.a.Renew(e.ctx, renew)
			e.expect("renew", first, err, protocol.StatusRenewed)
			replayed("renew", first, func() (protocol.Result, error) { return e.b.Renew(e.ctx, renew) })

			l = e.acquireDelayed(e.a, "released", "w1")
			release := protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()}
			first, err = e.a.Release(e.ctx, release)
			e.expect("release", first, err, protocol.StatusReleased)
			e.acquire(e.a, "released", "w2", leaseTTL) // a release frees the key at once
			replayed("release", first, func() (protocol.Result, error) { return e.b.Release(e.ctx, release) })

			l = e.acquireDelayed(e.a, "revoked", "w1")
			revoke := protocol.RevokeRequest{Key: l.Key, Actor: "operator", Reason: "contract", RequestID: e.rid()}
			first, err = e.b.Revoke(e.ctx, revoke)
			e.expect("revoke", first, err, protocol.StatusRevoked)
			e.clock.Advance(lockDelay + time.Second)
			e.acquire(e.a, "revoked", "w2", leaseTTL)
			replayed("revoke", first, func() (protocol.Result, error) { return e.a.Revoke(e.ctx, revoke) })
		}},
		{"answered_as_stored", func(e *env) {
			// A TTL and a lock-delay finer than a microsecond, the
			// precision of the stored times: the acquire, a get and a
			// replay of the acquire all answer the lease as stored.
			req := e.acquireReq("job", "w1", leaseTTL+999*time.Nanosecond)
			req.LockDelay = lockDelay + 999*time.Nanosecond
			now := e.clock.Now()
			res, err := e.a.Acquire(e.ctx, req)
			e.expect("acquire", res, err, protocol.StatusAcquired)
			again, err := e.b.Acquire(e.ctx, req)
			e.expect("replayed acquire", again, err, protocol.StatusAcquired)
			for what, l := range map[string]*protocol.Lease{"acquire": res.Lease, "get": e.get(e.b, "job"), "replay": again.Lease} {
				if !sameInstant(l.ExpiresAt, now.Add(leaseTTL)) || l.LockDelay != lockDelay {
					e.t.Errorf("%s: expires at %s with lock-delay %v; want %s and %v (microseconds, as stored)",
						what, l.ExpiresAt, l.LockDelay, now.Add(leaseTTL), lockDelay)
				}
			}
		}},
		{"after_revoke", func(e *env) {
			l := e.acquireDelayed(e.a, "job", "w1")
			e.clock.Advance(time.Second)
			revokedAt := e.clock.Now()
			e.revoke(e.b, "job")
			e.expectDelayed("acquire at the revoke", "job", l, revokedAt)
			// The holder's answers keep the precedence: a revoked lease is not_found.
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: leaseTTL, RequestID: e.rid()})
			e.expect("renew by the revoked holder", res, err, protocol.StatusNotFound)
			ended := l
			ended.ExpiresAt = revokedAt
			e.expectGetDelayed("get during the lock-delay", "job", ended)
			e.clock.Advance(lockDelay - time.Microsecond)
			e.expectDelayed("acquire 1µs before the delay ends", "job", l, revokedAt)
			e.clock.Advance(time.Microsecond)
			if got := e.get(e.b, "job"); got != nil {
				e.t.Fatalf("get after the lock-delay: %s, want not_found with no lease", fmtLease(got))
			}
			next := e.acquire(e.b, "job", "w2", leaseTTL)
			if next.Token <= l.Token {
				e.t.Fatalf("token %d after the delay, want more than %d", next.Token, l.Token)
			}
		}},
		{"after_expiry", func(e *env) {
			l := e.acquireDelayed(e.a, "job", "w1")
			e.clock.Advance(leaseTTL - precision) // the last instant the lease is live
			res, err := e.b.Acquire(e.ctx, e.acquireReq("job", "w2", leaseTTL))
			e.expect("acquire 1µs before the expiry", res, err, protocol.StatusConflict)
			e.expectLease("conflict carries the holder", res.Lease, l)
			if res.KeptByLockDelay() {
				e.t.Fatalf("conflict with a live lease: message %q says a lock-delay caused it", res.Message)
			}
			e.clock.Advance(precision)
			e.expectDelayed("acquire at the expiry", "job", l, l.ExpiresAt)
			res, err = e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: leaseTTL, RequestID: e.rid()})
			e.expect("renew by the holder after expiry", res, err, protocol.StatusExpired)
			e.expectGetDelayed("get during the lock-delay", "job", l)
			e.clock.Advance(lockDelay - time.Microsecond)
			e.expectDelayed("acquire 1µs before the delay ends", "job", l, l.ExpiresAt)
			e.clock.Advance(time.Microsecond)
			if got := e.get(e.b, "job"); got != nil {
				e.t.Fatalf("get after the lock-delay: %s, want not_found with no lease", fmtLease(got))
			}
			e.acquire(e.b, "job", "w2", leaseTTL)
		}},
		{"release_frees_at_once", func(e *env) {
			l := e.acquireDelayed(e.a, "job", "w1")
			e.release(e.a, l)
			if got := e.get(e.b, "job"); got != nil {
				e.t.Fatalf("get after the release: %s, want not_found with no lease (a release leaves no lock-delay)", fmtLease(got))
			}
			e.acquire(e.b, "job", "w2", leaseTTL)
		}},
		{"new_lease_drops_the_delay", func(e *env) {
			// A lease taken after the delay ended has only its own lock-delay
			// (none here): its release and expiry free the key at once.
			e.acquireDelayed(e.a, "job", "w1")
			e.revoke(e.b, "job")
			e.clock.Advance(lockDelay)
			l := e.acquire(e.b, "job", "w2", leaseTTL)
			e.clock.Advance(leaseTTL)
			if l.LockDelay != 0 {
				e.t.Fatalf("new lease lock-delay %v, want 0", l.LockDelay)
			}
			e.acquire(e.a, "job", "w3", leaseTTL)
		}},
		{"outlasts_a_sweep", func(e *env) {
			// A sweep removes rows whose lock-delay passed too: one
			// within the delay still keeps the key, whatever the grace.
			s, ok := e.h.Backend.(protocol.Sweeper)
			if !ok {
				e.t.Skip("the harness's backend does not implement protocol.Sweeper")
			}
			exp := e.acquireDelayed(e.a, "expired", "w1")
			e.clock.Advance(leaseTTL + time.Second)
			rev := e.acquireDelayed(e.a, "revoked", "w1")
			revokedAt := e.clock.Now()
			e.revoke(e.b, "revoked")
			e.clock.Advance(time.Second)
			if _, err := s.Sweep(e.ctx, 100, 0); err != nil {
				e.t.Fatalf("sweep: %v", err)
			}
			e.expectDelayed("acquire after a sweep, within an expired lease's lock-delay", "expired", exp, exp.ExpiresAt)
			e.expectDelayed("acquire after a sweep, within a revoked lease's lock-delay", "revoked", rev, revokedAt)
			e.clock.Advance(lockDelay)
			if _, err := s.Sweep(e.ctx, 100, 0); err != nil {
				e.t.Fatalf("sweep after the delays: %v", err)
			}
			for _, l := range []protocol.Lease{exp, rev} {
				if next := e.acquire(e.b, l.Key.Name, "w2", leaseTTL); next.Token <= rev.Token {
					e.t.Fatalf("%s: token %d after the delay, want more than %d", l.Key.Name, next.Token, rev.Token)
				}
			}
		}},
		{"kept_by_late_answers", func(e *env) {
			// Refusals change nothing: the expired holder's release
			// (expired) and a second revoke (not_found) neither free the
			// key nor move the end of its lock-delay.
			exp := e.acquireDelayed(e.a, "expired", "w1")
			e.clock.Advance(leaseTTL + time.Second)
			res, err := e.a.Release(e.ctx, protocol.ReleaseRequest{Key: exp.Key, Owner: exp.Owner, Token: exp.Token, RequestID: e.rid()})
			e.expect("release by the holder after expiry", res, err, protocol.StatusExpired)
			e.expectDelayed("acquire after the expired holder's release", "expired", exp, exp.ExpiresAt)
			rev := e.acquireDelayed(e.a, "revoked", "w1")
			revokedAt := e.clock.Now()
			e.revoke(e.b, "revoked")
			e.clock.Advance(time.Second)
			res, err = e.b.Revoke(e.ctx, protocol.RevokeRequest{Key: rev.Key, Actor: "operator", Reason: "again", RequestID: e.rid()})
			e.expect("a second revoke", res, err, protocol.StatusNotFound)
			res, err = e.b.Revoke(e.ctx, protocol.RevokeRequest{Key: exp.Key, Actor: "operator", Reason: "late", RequestID: e.rid()})
			e.expect("a revoke of the expired lease", res, err, protocol.StatusNotFound)
			e.expectDelayed("acquire after a second revoke", "revoked", rev, revokedAt)
			e.expectDelayed("acquire after a revoke of the expired lease", "expired", exp, exp.ExpiresAt)
			if rows := e.listAll(e.a, protocol.ListRequest{Namespace: e.ns, IncludeExpired: true}); len(rows) != 1 || rows[0].Key.Name != "expired" {
				e.t.Fatalf("rows within the delays: %v, want only the expired lease (a revoked one is never listed)", rows)
			}
		}},
		{"invalid", func(e *env) {
			for _, d := range []time.Duration{-time.Second, protocol.MaxLockDelay + time.Microsecond} {
				req := e.acquireReq("job", "w1", leaseTTL)
				req.LockDelay = d
				res, err := e.a.Acquire(e.ctx, req)
				e.expect("acquire with lock-delay "+d.String(), res, err, protocol.StatusInvalid)
			}
			if e.row("job") != nil {
				e.t.Fatal("an invalid acquire wrote a row")
			}
		}},
	}
}

// renewKeepsTTLCases check that a renew without a TTL keeps the lease's
// own: the TTL of its last acquire or renew.
func renewKeepsTTLCases() []testCase {
	return []testCase{
		{"keeps_the_acquires_ttl", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(3 * time.Second)
			now := e.clock.Now()
			res, err := e.b.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()})
			e.expect("renew without a ttl", res, err, protocol.StatusRenewed)
			l.RenewedAt, l.ExpiresAt = now, now.Add(leaseTTL)
			e.expectLease("renewed lease", res.Lease, l)
			e.expectLease("get", e.get(e.a, "job"), l)
		}},
		{"keeps_the_last_renews_ttl", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("renew with a ttl", res, err, protocol.StatusRenewed)
			e.clock.Advance(time.Second)
			now := e.clock.Now()
			res, err = e.b.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()})
			e.expect("renew without a ttl", res, err, protocol.StatusRenewed)
			if !sameInstant(res.Lease.ExpiresAt, now.Add(renewTTL)) {
				e.t.Fatalf("expires at %s, want %s (the last renew's ttl)", res.Lease.ExpiresAt, now.Add(renewTTL))
			}
		}},
		{"precedence_unchanged", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()})
			e.expect("renew without a ttl after expiry", res, err, protocol.StatusExpired)
			res, err = e.a.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: -time.Second, RequestID: e.rid()})
			e.expect("renew with a negative ttl", res, err, protocol.StatusInvalid)
		}},
	}
}
