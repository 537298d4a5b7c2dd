package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestEveryCallAfterCloseAnswersClosed: once Close began, every call of a
// Backend, from Open or from New, answers closed (DESIGN.md's status for a
// closed store: nothing was read or written), as its Subscribe did and as
// every call of the SQLite and etcd backends does. The operations answered
// unavailable ("the effect is unknown: retry with the same request id"),
// the pgx pool's "closed pool", on a pool Close closed, and on a pool given
// to New, which Close leaves open, they went on being served:
// protocol.WatchLease stops on closed and subscribes again on unavailable,
// and the scheduler takes closed for a request never sent.
func TestEveryCallAfterCloseAnswersClosed(t *testing.T) {
	t.Parallel()
	for _, from := range []string{"Open", "New"} {
		t.Run(from, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			dsn := pgtest.MigratedDSN(t)
			var b *postgres.Backend
			var err error
			if from == "Open" {
				b, err = postgres.Open(ctx, dsn, nil)
			} else {
				b, err = postgres.New(ctx, rawPool(t, dsn), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Minute, RequestID: "r0"})
			if err != nil || held.Status != protocol.StatusAcquired {
				t.Fatalf("acquire before Close: %v %v", held.Status, err)
			}
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			tok := held.Lease.Token
			calls := []struct {
				name string
				call func() error
			}{
				{"acquire", func() error {
					_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
					return err
				}},
				{"renew", func() error {
					_, err := b.Renew(ctx, protocol.RenewRequest{Key: key("held"), Owner: "w", Token: tok, TTL: time.Minute, RequestID: "r2"})
					return err
				}},
				{"release", func() error {
					_, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "w", Token: tok, RequestID: "r3"})
					return err
				}},
				{"revoke", func() error {
					_, err := b.Revoke(ctx, protocol.RevokeRequest{Key: key("held"), Actor: "op", Reason: "test", RequestID: "r4"})
					return err
				}},
				{"renew many", func() error {
					_, err := b.RenewMany(ctx, []protocol.RenewRequest{
						{Key: key("held"), Owner: "w", Token: tok, TTL: time.Minute, RequestID: "r5"},
						{Key: key("other"), Owner: "w", Token: tok, TTL: time.Minute, RequestID: "r5b"},
					})
					return err
				}},
				{"get", func() error { _, err := b.Get(ctx, protocol.GetRequest{Key: key("held")}); return err }},
				{"list", func() error { _, err := b.List(ctx, protocol.ListRequest{Namespace: "ns"}); return err }},
				{"audit", func() error { _, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns"}); return err }},
				{"namespaces", func() error { _, err := b.Namespaces(ctx, "", 10); return err }},
				{"health", func() error { return b.Health(ctx) }},
				{"sweep", func() error { _, err := b.Sweep(ctx, 10, 0); return err }},
				{"raise", func() error { _, err := b.RaiseTokens(ctx, 1000); return err }},
				{"prune", func() error {
					_, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now().Add(-time.Hour), Actor: "op", RequestID: "r6"})
					return err
				}},
				{"subscribe", func() error {
					_, cancel, err := b.Subscribe(ctx, key("held"))
					if cancel != nil {
						cancel()
					}
					return err
				}},
			}
			for _, c := range calls {
				err := c.call()
				if protocol.StatusOf(err) != protocol.StatusClosed || !errors.Is(err, protocol.ErrClosed) || errors.Is(err, protocol.ErrUnavailable) {
					t.Errorf("%s after Close: %v (status %q); want closed, matching protocol.ErrClosed alone", c.name, err, protocol.StatusOf(err))
				}
			}
			_ = b.Close(context.Background())
		})
	}
}
