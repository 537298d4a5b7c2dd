package contract

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// ExpectClosed checks that every call of b, a backend handle that its
// caller has closed, answers closed, as DESIGN.md's status for a closed
// store says (nothing was read or written): each operation of
// [protocol.Backend] and of each optional interface b implements
// ([protocol.Notifier], [protocol.BulkRenewer], [audit.Reader],
// [audit.Follower], [audit.PositionFollower], [protocol.NamespaceLister],
// [protocol.Sweeper], [protocol.TokenRaiser], [audit.Pruner]) fails with an
// *[protocol.Error] of status closed that matches [protocol.ErrClosed] and
// neither [protocol.ErrUnavailable] nor [protocol.ErrTimeout] (those say
// "the effect is unknown: retry", which a closed handle never learns), and
// carries no lease, record or page. A second Close answers the first's
// outcome: nil. held is a lease b acquired before it was closed; its
// renew, release and revoke are tried.
//
// The suite's Lifecycle group runs it on the harness's Second handle;
// a backend's own tests call it for handles the harness does not make
// (one over a borrowed pool, say). It reports every call that answered
// otherwise with t.Errorf.
func ExpectClosed(t testing.TB, b protocol.Backend, held protocol.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	c := closedChecker{t: t}
	ns := held.Key.Namespace
	other := protocol.Key{Namespace: ns, Name: held.Key.Name + "-after-close"}

	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: other, Owner: held.Owner, TTL: leaseTTL, RequestID: "closed-acquire"})
	c.result("acquire", res, err)
	res, err = b.Renew(ctx, protocol.RenewRequest{Key: held.Key, Owner: held.Owner, Token: held.Token, TTL: renewTTL, RequestID: "closed-renew"})
	c.result("renew", res, err)
	res, err = b.Release(ctx, protocol.ReleaseRequest{Key: held.Key, Owner: held.Owner, Token: held.Token, RequestID: "closed-release"})
	c.result("release", res, err)
	res, err = b.Revoke(ctx, protocol.RevokeRequest{Key: held.Key, Actor: "operator", Reason: "contract", Token: held.Token, RequestID: "closed-revoke"})
	c.result("revoke", res, err)
	res, err = b.Get(ctx, protocol.GetRequest{Key: held.Key})
	c.result("get", res, err)
	list, err := b.List(ctx, protocol.ListRequest{Namespace: ns, IncludeExpired: true})
	c.err("list", err)
	if list.Status != "" && list.Status != protocol.StatusClosed || len(list.Leases) != 0 || list.NextCursor != "" {
		t.Errorf("list after Close: status %q, %d leases, next cursor %q; want closed and nothing read",
			list.Status, len(list.Leases), list.NextCursor)
	}
	c.err("health", b.Health(ctx))

	if n, ok := b.(protocol.Notifier); ok {
		ch, unsubscribe, err := n.Subscribe(ctx, held.Key)
		if unsubscribe != nil {
			unsubscribe()
		}
		c.err("subscribe", err)
		if ch != nil {
			t.Errorf("subscribe after Close: returned a channel")
		}
	}
	if br, ok := b.(protocol.BulkRenewer); ok {
		results, err := br.RenewMany(ctx, []protocol.RenewRequest{
			{Key: held.Key, Owner: held.Owner, Token: held.Token, TTL: renewTTL, RequestID: "closed-renew-many-1"},
			{Key: other, Owner: held.Owner, Token: held.Token, TTL: renewTTL, RequestID: "closed-renew-many-2"},
		})
		c.err("renew many", err)
		for i, r := range results {
			if r.Status != protocol.StatusClosed || r.Lease != nil {
				t.Errorf("renew many after Close: result %d: status %q, lease %s; want closed and no lease", i, r.Status, fmtLease(r.Lease))
			}
		}
	}
	if r, ok := b.(audit.Reader); ok {
		for _, q := range []audit.Query{{Namespace: ns}, {Namespace: ns, Newest: true}, {Namespace: ns, Follow: true}} {
			page, err := r.ReadAudit(ctx, q)
			what := fmt.Sprintf("audit read %+v", q)
			c.err(what, err)
			if len(page.Records) != 0 || page.NextCursor != "" {
				t.Errorf("%s after Close: %d records, next cursor %q; want nothing read", what, len(page.Records), page.NextCursor)
			}
		}
	}
	if f, ok := b.(audit.Follower); ok {
		c.follow("follow", func(ctx context.Context) iter.Seq2[audit.Record, error] {
			return f.Follow(ctx, audit.Query{Namespace: ns})
		})
	}
	if f, ok := b.(audit.PositionFollower); ok {
		c.follow("follow with positions", func(ctx context.Context) iter.Seq2[audit.Record, error] {
			return f.FollowPositions(ctx, audit.Query{Namespace: ns}, func(cursor string) {
				t.Errorf("follow with positions after Close: passed cursor %q", cursor)
			})
		})
	}
	if l, ok := b.(protocol.NamespaceLister); ok {
		names, err := l.Namespaces(ctx, "", 10)
		c.err("namespaces", err)
		if len(names) != 0 {
			t.Errorf("namespaces after Close: %q; want nothing read", names)
		}
	}
	if s, ok := b.(protocol.Sweeper); ok {
		swept, err := s.Sweep(ctx, 10, 0)
		c.err("sweep", err)
		if swept != (protocol.SweepResult{}) {
			t.Errorf("sweep after Close: %+v; want nothing done", swept)
		}
	}
	if r, ok := b.(protocol.TokenRaiser); ok {
		_, err := r.RaiseTokens(ctx, protocol.MinTokenRaise)
		c.err("raise tokens", err)
	}
	if p, ok := b.(audit.Pruner); ok {
		pruned, err := p.PruneAudit(ctx, audit.PruneRequest{Before: pruneBefore, Actor: "operator", RequestID: "closed-prune"})
		c.err("prune", err)
		if pruned.Removed != 0 || pruned.Record.ID != 0 {
			t.Errorf("prune after Close: removed %d, record %d; want nothing done", pruned.Removed, pruned.Record.ID)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Errorf("second Close: %v; want nil, the first Close's outcome", err)
	}
}

// pruneBefore is the cut-off of [ExpectClosed]'s prune: in the past by
// the suite's clock and by the wall clock alike, so that it is valid.
var pruneBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// AcquireCloseExpectClosed acquires a lease through b (key "held" of
// namespace ns), closes b and runs [ExpectClosed] with that lease: the
// whole check for a handle the harness does not make. It fails t when the
// acquire or the Close does.
func AcquireCloseExpectClosed(t testing.TB, b protocol.Backend, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: "held"}, Owner: "w",
		TTL: leaseTTL, RequestID: "before-close"})
	if err != nil || held.Status != protocol.StatusAcquired {
		t.Fatalf("acquire before Close: %v %v", held.Status, err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ExpectClosed(t, b, *held.Lease)
}

// closedChecker checks the answers of a closed handle (see [ExpectClosed]).
type closedChecker struct{ t testing.TB }

// err checks that a call of a closed handle (what) failed closed alone.
func (c closedChecker) err(what string, err error) {
	c.t.Helper()
	var pe *protocol.Error
	switch {
	case err == nil:
		c.t.Errorf("%s after Close: a nil error; want closed", what)
	case !errors.As(err, &pe) || pe.Status != protocol.StatusClosed:
		c.t.Errorf("%s after Close: %v (status %q); want an *protocol.Error of status closed", what, err, protocol.StatusOf(err))
	case !errors.Is(err, protocol.ErrClosed) || errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrTimeout):
		c.t.Errorf("%s after Close: %v; want it to match protocol.ErrClosed alone (ErrClosed %v, ErrUnavailable %v, ErrTimeout %v)",
			what, err, errors.Is(err, protocol.ErrClosed), errors.Is(err, protocol.ErrUnavailable), errors.Is(err, protocol.ErrTimeout))
	case pe.Lease != nil:
		c.t.Errorf("%s after Close: the error carries lease %s; want none (nothing was read)", what, fmtLease(pe.Lease))
	}
}

// result checks a closed handle's answer to an operation: closed, with
// no lease and no outcome in the result.
func (c closedChecker) result(what string, res protocol.Result, err error) {
	c.t.Helper()
	c.err(what, err)
	if res.Status != "" && res.Status != protocol.StatusClosed || res.Lease != nil || res.Replayed {
		c.t.Errorf("%s after Close: result status %q, lease %s, replayed %v; want closed and nothing read",
			what, res.Status, fmtLease(res.Lease), res.Replayed)
	}
}

// follow checks that a closed handle's follow yields one failure, closed,
// and ends: a follow that went on would retry a store that never answers.
func (c closedChecker) follow(what string, stream func(ctx context.Context) iter.Seq2[audit.Record, error]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), opTimeout)
	defer cancel()
	n := 0
	for rec, err := range stream(ctx) {
		n++
		if n > 1 {
			c.t.Errorf("%s after Close: yielded again (record %d, error %v) after its first answer; want the stream to end", what, rec.ID, err)
			break
		}
		if rec.ID != 0 {
			c.t.Errorf("%s after Close: yielded record %d; want nothing read", what, rec.ID)
		}
		c.err(what, err)
	}
	if n == 0 {
		c.t.Errorf("%s after Close: ended without a word; want one failure, closed", what)
	}
}
