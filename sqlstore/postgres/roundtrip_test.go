package postgres_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// queryCounter is a pgx QueryTracer that counts the queries sent.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// writeCounter wraps a connection and counts its writes. pgx buffers the
// messages of one request and flushes them with one write, then reads the
// answer: one write is one round trip.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c *writeCounter) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// countingPool returns a pool of one connection to dsn, closed when the
// test ends, that counts the queries it sends and its round trips (its
// writes).
func countingPool(t *testing.T, dsn string) (pool *pgxpool.Pool, queries *queryCounter, writes *atomic.Int64) {
	t.Helper()
	queries, writes = new(queryCounter), new(atomic.Int64)
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = 1
	pcfg.ConnConfig.Tracer = queries
	pcfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeCounter{Conn: c, n: writes}, nil
	}
	pool, err = pgxpool.NewWithConfig(ctxT(t), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, queries, writes
}

// TestOneRoundTripPerOperation checks that every operation, whatever its
// outcome, is one query and one round trip on the wire. The pool has one
// connection and every statement is run once first: pgx prepares a
// statement (one more round trip) the first time a connection uses it, and
// caches it for the connection's life.
func TestOneRoundTripPerOperation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	pool, queries, writes := countingPool(t, dsn)
	clock := contract.NewClock()
	b, err := postgres.New(ctxT(t), pool, postgres.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)

	// Warm the statement cache (and move the token sequence past 1).
	for i, w := range []string{"w1", "w2"} {
		_, _ = b.Acquire(ctx, protocol.AcquireRequest{Key: key(w), Owner: "w", TTL: time.Second, RequestID: w})
		_, _ = b.Renew(ctx, protocol.RenewRequest{Key: key(w), Owner: "w", Token: int64(i + 1), TTL: time.Second, RequestID: w + "r"})
		_, _ = b.Release(ctx, protocol.ReleaseRequest{Key: key(w), Owner: "w", Token: int64(i + 1), RequestID: w + "l"})
		_, _ = b.Revoke(ctx, protocol.RevokeRequest{Key: key(w), Actor: "w", Reason: "x", RequestID: w + "v"})
		_, _ = b.Get(ctx, protocol.GetRequest{Key: key(w), RequestID: w + "g"})
		_, _ = b.List(ctx, protocol.ListRequest{Namespace: "ns", RequestID: w + "s"})
		_, _ = b.List(ctx, protocol.ListRequest{Namespace: "ns", Owner: "w", RequestID: w + "s"})
		_, _ = b.ReadAudit(ctx, auditQuery("ns"))
		_, _ = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: w})
	}

	measure := func(what string, want protocol.Status, replayed bool, op func() (protocol.Result, error)) protocol.Result {
		t.Helper()
		q0, w0 := queries.n.Load(), writes.Load()
		res, err := op()
		if want == protocol.StatusInvalid { // a reused request id: answered as the runtime does, with an error
			wantErrStatus(t, what, err, want)
			err = nil
		}
		wantStatus(t, what, res, err, want)
		if res.Replayed != replayed {
			t.Fatalf("%s: replayed %v, want %v", what, res.Replayed, replayed)
		}
		if q, w := queries.n.Load()-q0, writes.Load()-w0; q != 1 || w != 1 {
			t.Fatalf("%s: %d queries and %d round trips, want 1 and 1", what, q, w)
		}
		return res
	}
	acquire := func(name, owner, rid string) func() (protocol.Result, error) {
		return func() (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: owner, TTL: time.Minute, RequestID: rid})
		}
	}
	renew := func(name, owner string, token int64, rid string) func() (protocol.Result, error) {
		return func() (protocol.Result, error) {
			return b.Renew(ctx, protocol.RenewRequest{Key: key(name), Owner: owner, Token: token, TTL: time.Minute, RequestID: rid})
		}
	}
	release := func(name, owner string, token int64, rid string) func() (protocol.Result, error) {
		return func() (protocol.Result, error) {
			return b.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: owner, Token: token, RequestID: rid})
		}
	}
	revoke := func(name string, token int64, rid string) func() (protocol.Result, error) {
		return func() (protocol.Result, error) {
			return b.Revoke(ctx, protocol.RevokeRequest{Key: key(name), Actor: "op", Reason: "test", Token: token, RequestID: rid})
		}
	}
	get := func(name string) func() (protocol.Result, error) {
		return func() (protocol.Result, error) {
			return b.Get(ctx, protocol.GetRequest{Key: key(name), RequestID: "get"})
		}
	}

	tok := measure("acquire", protocol.StatusAcquired, false, acquire("k", "a", "a1")).Lease.Token
	measure("acquire held", protocol.StatusConflict, false, acquire("k", "b", "a2"))
	measure("acquire replay", protocol.StatusAcquired, true, acquire("k", "a", "a1"))
	measure("acquire reused id", protocol.StatusInvalid, false, acquire("k", "c", "a1"))

	measure("renew", protocol.StatusRenewed, false, renew("k", "a", tok, "r1"))
	measure("renew replay", protocol.StatusRenewed, true, renew("k", "a", tok, "r1"))
	measure("renew stale", protocol.StatusStaleToken, false, renew("k", "a", tok-1, "r2"))
	measure("renew newer token", protocol.StatusNotOwner, false, renew("k", "a", tok+100, "r3"))
	measure("renew other owner", protocol.StatusNotOwner, false, renew("k", "b", tok, "r4"))
	measure("renew no lease", protocol.StatusNotFound, false, renew("none", "a", tok, "r5"))

	measure("release stale", protocol.StatusStaleToken, false, release("k", "a", tok-1, "l1"))
	measure("release not owner", protocol.StatusNotOwner, false, release("k", "b", tok, "l2"))
	measure("release no lease", protocol.StatusNotFound, false, release("none", "a", tok, "l3"))

	measure("revoke stale", protocol.StatusStaleToken, false, revoke("k", tok-1, "v1"))
	measure("revoke newer token", protocol.StatusNotOwner, false, revoke("k", tok+100, "v2"))
	measure("revoke no lease", protocol.StatusNotFound, false, revoke("none", 0, "v3"))

	measure("get", protocol.StatusFound, false, get("k"))
	measure("get no lease", protocol.StatusNotFound, false, get("none"))
	measure("list", protocol.StatusFound, false, func() (protocol.Result, error) {
		l, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 1, RequestID: "list"})
		return protocol.Result{Status: l.Status}, err
	})
	measure("list by owner", protocol.StatusFound, false, func() (protocol.Result, error) {
		l, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", Owner: "a", RequestID: "list"})
		return protocol.Result{Status: l.Status}, err
	})
	measure("audit", protocol.StatusFound, false, func() (protocol.Result, error) {
		_, err := b.ReadAudit(ctx, auditQuery("ns"))
		return protocol.Result{Status: protocol.StatusFound}, err
	})
	measure("audit of a key", protocol.StatusFound, false, func() (protocol.Result, error) {
		_, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "k"})
		return protocol.Result{Status: protocol.StatusFound}, err
	})

	clock.Advance(2 * time.Minute)
	measure("renew expired", protocol.StatusExpired, false, renew("k", "a", tok, "r6"))
	measure("release expired", protocol.StatusExpired, false, release("k", "a", tok, "l4"))
	measure("revoke expired", protocol.StatusNotFound, false, revoke("k", 0, "v4"))
	measure("get expired", protocol.StatusNotFound, false, get("k"))
	tok2 := measure("acquire over expired", protocol.StatusAcquired, false, acquire("k", "b", "a3")).Lease.Token
	measure("release", protocol.StatusReleased, false, release("k", "b", tok2, "l5"))
	measure("release replay", protocol.StatusReleased, true, release("k", "b", tok2, "l5"))
	measure("acquire again", protocol.StatusAcquired, false, acquire("k", "c", "a4"))
	measure("revoke", protocol.StatusRevoked, false, revoke("k", 0, "v5"))
	measure("revoke replay", protocol.StatusRevoked, true, revoke("k", 0, "v5"))
}
