// Package replaycompat checks that a SQL backend replays the audit records
// written before schema version 5, which hold no lock-delay: Check makes
// the records of a renew, a release and a revoke of leases with a
// lock-delay, has the caller take the lock-delay out of them (a migration
// down to version 4 and up again), and repeats each request on a backend
// opened afresh. The replay answers the first attempt's lease with
// lock-delay 0, as releases before schema 5 did, and does not fail.
//
// It also writes the record of an acquire as a release that counted the
// namespace default in its fingerprint wrote it (the default handed to
// the backend as the request's lock-delay) and retries it asking for none:
// it replays with the lock-delay the lease got, the default changed or not
// while the record holds the lock-delay, and, once it does not, while the
// default is the same.
//
// For tests only; it imports no database driver. Both SQL backends' tests
// use it.
package replaycompat

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// lockDelay is the lock-delay of the leases Check takes.
const lockDelay = time.Hour

// Check runs the check in namespace ns. open opens a backend on the
// migrated store (Check closes it); strip takes the lock-delay out of
// every audit record, with no backend open.
func Check(ctx context.Context, t *testing.T, ns string, open func() protocol.Backend, strip func()) {
	t.Helper()
	key := func(name string) protocol.Key { return protocol.Key{Namespace: ns, Name: name} }
	b := open()
	acquire := func(name string) protocol.Lease {
		t.Helper()
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Minute, LockDelay: lockDelay, RequestID: name + "-a"})
		if err != nil || res.Status != protocol.StatusAcquired {
			t.Fatalf("acquire %s: %+v, %v; want acquired", name, res, err)
		}
		return *res.Lease
	}
	l := acquire("renewed")
	renew := protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: time.Minute, RequestID: "renew"}
	l = acquire("released")
	release := protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: "release"}
	acquire("revoked")
	revoke := protocol.RevokeRequest{Key: key("revoked"), Actor: "op", Reason: "test", RequestID: "revoke"}
	cases := []struct {
		what  string
		want  protocol.Status
		do    func(protocol.Backend) (protocol.Result, error)
		first protocol.Result
	}{
		{"renew", protocol.StatusRenewed, func(b protocol.Backend) (protocol.Result, error) { return b.Renew(ctx, renew) }, protocol.Result{}},
		{"release", protocol.StatusReleased, func(b protocol.Backend) (protocol.Result, error) { return b.Release(ctx, release) }, protocol.Result{}},
		{"revoke", protocol.StatusRevoked, func(b protocol.Backend) (protocol.Result, error) { return b.Revoke(ctx, revoke) }, protocol.Result{}},
	}
	for i, c := range cases {
		res, err := c.do(b)
		if err != nil || res.Status != c.want || res.Lease == nil || res.Lease.LockDelay != lockDelay {
			t.Fatalf("%s: %+v, %v; want %s with its lease's lock-delay %v", c.what, res, err, c.want, lockDelay)
		}
		cases[i].first = res
	}
	// A release that counted the default in handed it to the backend as
	// the request's lock-delay.
	acquire("defaulted")
	retry := func(what string, b protocol.Backend, def time.Duration) {
		t.Helper()
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("defaulted"), Owner: "w", TTL: time.Minute,
			RequestID: "defaulted-a", DefaultLockDelay: def})
		if err != nil || res.Status != protocol.StatusAcquired || !res.Replayed || res.Lease == nil || res.Lease.LockDelay != lockDelay {
			t.Fatalf("%s: %+v, %v; want replayed acquired with lock-delay %v", what, res, err, lockDelay)
		}
	}
	retry("retry of an acquire that took the default, under another default", b, 7*time.Second)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	strip()
	b = open()
	defer func() { _ = b.Close(context.Background()) }()
	for _, c := range cases {
		res, err := c.do(b)
		want := *c.first.Lease
		want.LockDelay = 0
		if err != nil || res.Status != c.want || !res.Replayed || res.Lease == nil || !same(*res.Lease, want) {
			t.Fatalf("replayed %s of a record without lock-delay: %+v (lease %+v), %v; want replayed %s with %+v",
				c.what, res, res.Lease, err, c.want, want)
		}
	}
	retry("retry of an acquire that took the default, its record without lock-delay", b, lockDelay)
}

// same reports whether a and b are the same lease, their times compared
// as instants.
func same(a, b protocol.Lease) bool {
	return a.Key == b.Key && a.Owner == b.Owner && a.Token == b.Token && a.AcquiredAt.Equal(b.AcquiredAt) &&
		a.RenewedAt.Equal(b.RenewedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.LockDelay == b.LockDelay &&
		a.Version == b.Version
}
