package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// opTimeout bounds each operation of these tests; none waits for it.
const opTimeout = 20 * time.Second

var appSeq atomic.Int64

// appName returns an application_name unique to this test process and call,
// so pg_stat_activity can tell our connections from everyone else's.
func appName(t testing.TB) string {
	return fmt.Sprintf("lstest-%d-%d", time.Now().UnixNano()%1e9, appSeq.Add(1))
}

// ctxT returns a context bounded by opTimeout.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openBackend opens a backend on dsn and closes it when the test ends.
func openBackend(t testing.TB, dsn string, cfg *postgres.Config) *postgres.Backend {
	t.Helper()
	b, err := postgres.Open(ctxT(t), dsn, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// rawPool opens a plain pgx pool on dsn, closed when the test ends.
func rawPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(ctxT(t), dsn)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// rawConn opens one connection on dsn, closed when the test ends.
func rawConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func mustExec(t testing.TB, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, sql string, args ...any) {
	t.Helper()
	if _, err := q.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("exec %q: %v", firstLine(sql), err)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// count runs a SELECT count(*)-like query returning one integer.
func count(t testing.TB, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRow(ctxT(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", firstLine(sql), err)
	}
	return n
}

// wantStatus fails the test unless a backend call answered status want
// (backends report every protocol outcome with a nil error).
func wantStatus(t testing.TB, what string, res protocol.Result, err error, want protocol.Status) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: error %v, want status %q", what, err, want)
	}
	if res.Status != want {
		t.Fatalf("%s: status %q (%s), want %q", what, res.Status, res.Message, want)
	}
}

// wantErrStatus fails the test unless err carries status want.
func wantErrStatus(t testing.TB, what string, err error, want protocol.Status) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want status %q", what, want)
	}
	if got := protocol.StatusOf(err); got != want {
		t.Fatalf("%s: error %v has status %q, want %q", what, err, got, want)
	}
}

func key(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }

// keysIn returns key's counterpart for namespace ns (from
// pgtest.Namespace, for tests whose keys no other test may hold).
func keysIn(ns string) func(name string) protocol.Key {
	return func(name string) protocol.Key { return protocol.Key{Namespace: ns, Name: name} }
}

func auditQuery(ns string) audit.Query { return audit.Query{Namespace: ns} }

// waitsOn counts the server sessions waiting for a lock that c's session
// holds (0 on an error). Unlike a count of all waits in pg_locks, it is
// not fooled by other tests' sessions waiting on locks of their own.
func waitsOn(ctx context.Context, c *pgx.Conn) int {
	var n int
	_ = c.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND $1 = ANY(pg_blocking_pids(pid))`,
		c.PgConn().PID()).Scan(&n)
	return n
}

// acquireKeys acquires key("k0") ... key("kN-1") for owner w with ttl,
// under request ids a0 ... aN-1.
func acquireKeys(t testing.TB, b *postgres.Backend, key func(string) protocol.Key, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "w",
			TTL: ttl, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
}

// acquireLapsed acquires as acquireKeys does, leases of a millisecond, and
// waits until they have expired by the server's clock: their records are
// the ones a prune removes (it keeps a live lease's acquire).
func acquireLapsed(t testing.TB, b *postgres.Backend, key func(string) protocol.Key, n int) {
	t.Helper()
	acquireKeys(t, b, key, n, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
}
