package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/proccpu"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The benchmarks run each operation through the backend and, beside it, a
// raw baseline: the equivalent single statement (the conditional change and
// the audit insert, without the idempotency look-up, the key lock, the
// snapshot read acquire makes to keep conflicts read-only, and what the
// classification needs) sent straight through the same kind of pool. Each goroutine count gets a fresh schema and a pool of
// that many connections. ns/op is wall time divided by operations, so it is
// the inverse of throughput at that concurrency.
//
// Request ids are random, as the runtime makes them: sequential ids would
// crowd every insert into one page of the request id index, a contention
// real traffic does not have.
//
// On a machine shared with other work, wall time is noisy. When the server
// runs on the same Linux host (its processes are readable in /proc), the
// benchmarks also report the CPU time spent per operation by the server
// processes serving the pool (pg-cpu-us/op) and by this process
// (go-cpu-us/op): at high concurrency on a small machine, throughput is
// bounded by their sum.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench . -benchtime 2s ./sqlstore/postgres/

var benchConcurrency = []int{1, 8, 32}

const rawAcquireSQL = `
WITH up AS (
    INSERT INTO leasestore_leases AS l (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
    VALUES ($1, $2, $3, nextval('leasestore_fencing_seq'), now(), now(), now() + $4::interval, 1)
    ON CONFLICT (namespace, name) DO UPDATE
        SET owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
            renewed_at = excluded.renewed_at, expires_at = excluded.expires_at
        WHERE l.expires_at <= excluded.acquired_at
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at)
    SELECT pg_current_xact_id()::text::bigint, up.acquired_at, 'acquire', $1, $2, up.owner, up.token, $5, $3, '',
           'acquired', 1, $6, up.expires_at
    FROM up
)
SELECT owner, token, acquired_at, renewed_at, expires_at FROM up`

const rawRenewSQL = `
WITH up AS (
    UPDATE leasestore_leases l SET renewed_at = now(), expires_at = now() + $5::interval
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4 AND l.expires_at > now()
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at)
    SELECT pg_current_xact_id()::text::bigint, up.renewed_at, 'renew', $1, $2, up.owner, up.token, $6, $3, '',
           'renewed', 1, $7, up.expires_at
    FROM up
)
SELECT owner, token, acquired_at, renewed_at, expires_at FROM up`

const rawReleaseSQL = `
WITH del AS (
    DELETE FROM leasestore_leases l
    WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3 AND l.token = $4 AND l.expires_at > now()
    RETURNING l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at
), rec AS (
    INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
                                  status, version, params_hash, expires_at)
    SELECT pg_current_xact_id()::text::bigint, now(), 'release', $1, $2, del.owner, del.token, $5, $3, '',
           'released', 1, $6, NULL
    FROM del
)
SELECT owner, token, acquired_at, renewed_at, expires_at FROM del`

// benchEnv is one fresh schema with a backend and a raw pool of n
// connections each.
type benchEnv struct {
	b    *postgres.Backend
	pool *pgxpool.Pool
}

func newBenchEnv(b *testing.B, conns int) benchEnv {
	b.Helper()
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	dsn := pgtest.MigratedDSN(b)
	// A pool of one is refused (an operation waiting on a stuck key would
	// hold every other up): the single-caller benchmarks get two, and
	// warmPool counts both connections' server CPU.
	cfg := &postgres.Config{MaxConns: int32(max(conns, 2))}
	backend := openBackend(b, dsn, cfg)
	raw := openBackend(b, dsn, cfg) // the same pool settings, used raw
	return benchEnv{b: backend, pool: raw.Pool()}
}

// runWorkers runs b.N operations on n goroutines through pool; op gets the
// worker and the operation's index and reports whether it had the expected
// outcome. Beside time it reports the CPU the pool's server processes and
// this process used per operation, and the WAL the server wrote per
// operation (wal-B/op: the whole server's, so it holds only when nothing
// else writes there during the run).
func runWorkers(b *testing.B, pool *pgxpool.Pool, n int, op func(worker, i int) error) {
	b.Helper()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	pids := warmPool(b, pool, n)
	// Warm up outside the measurement: every connection prepares the
	// statement and plans it a few times before the server settles on a
	// generic plan; a service pays that once per connection, not per
	// operation. The warm-up uses the indices after b.N.
	run := func(from, to int) {
		next.Store(int64(from))
		for w := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= to {
						return
					}
					if err := op(w, i); err != nil {
						first.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	run(b.N, b.N+warmUp(n))
	wal0 := walPosition(b, pool)
	server0, client0 := serverCPU(pids), proccpu.Self()
	b.ResetTimer()
	run(0, b.N)
	b.StopTimer()
	if err := first.Load(); err != nil {
		b.Fatal(err)
	}
	server1, client1 := serverCPU(pids), proccpu.Self()
	b.ReportMetric(float64(walPosition(b, pool)-wal0)/float64(b.N), "wal-B/op")
	if server0 >= 0 && server1 >= 0 && len(pids) == int(pool.Stat().TotalConns()) {
		b.ReportMetric(float64(server1-server0)/float64(time.Microsecond)/float64(b.N), "pg-cpu-us/op")
	}
	b.ReportMetric(float64(client1-client0)/float64(time.Microsecond)/float64(b.N), "go-cpu-us/op")
}

// walPosition returns the server's WAL insert position, in bytes.
func walPosition(b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	ctx, cancel := benchCtx()
	defer cancel()
	var pos int64
	if err := pool.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").Scan(&pos); err != nil {
		b.Fatal(err)
	}
	return pos
}

// warmUp is the number of operations run before the measurement with n
// goroutines: enough for each connection (at least two, see newBenchEnv)
// to pass the plan cache's five custom plans.
func warmUp(n int) int { return 10 * max(n, 2) }

// warmPool opens every connection pool may hold (at least n) and returns
// their server process ids, so that the CPU of whichever connection an
// operation runs on is counted.
func warmPool(b *testing.B, pool *pgxpool.Pool, n int) []uint32 {
	b.Helper()
	ctx, cancel := benchCtx()
	defer cancel()
	n = max(n, int(pool.Config().MaxConns))
	conns := make([]*pgxpool.Conn, 0, n)
	pids := make([]uint32, 0, n)
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		pids = append(pids, c.Conn().PgConn().PID())
	}
	for _, c := range conns {
		c.Release()
	}
	return pids
}

// serverCPU returns the CPU time (user and system) the server processes
// pids have used, or -1 when /proc does not show them (another host).
func serverCPU(pids []uint32) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		c := proccpu.Of(int(pid))
		if c < 0 {
			return -1
		}
		total += c
	}
	return total
}

func benchCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func wantBench(res protocol.Result, err error, want protocol.Status) error {
	if err != nil {
		return err
	}
	if res.Status != want {
		return fmt.Errorf("status %q (%s), want %q", res.Status, res.Message, want)
	}
	return nil
}

func benchInterval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

// rawRow scans the five columns the raw statements return; a missing row
// means the change did not happen.
func rawRow(env benchEnv, sql string, args ...any) error {
	ctx, cancel := benchCtx()
	defer cancel()
	var (
		owner   string
		token   int64
		a, r, e time.Time
	)
	return env.pool.QueryRow(ctx, sql, args...).Scan(&owner, &token, &a, &r, &e)
}

func BenchmarkAcquire(b *testing.B) {
	for _, n := range benchConcurrency {
		b.Run(fmt.Sprintf("goroutines=%d/backend", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			runWorkers(b, env.b.Pool(), n, func(_, i int) error {
				ctx, cancel := benchCtx()
				defer cancel()
				res, err := env.b.Acquire(ctx, protocol.AcquireRequest{
					Key: key(fmt.Sprintf("k-%d", i)), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID(),
				})
				return wantBench(res, err, protocol.StatusAcquired)
			})
		})
		b.Run(fmt.Sprintf("goroutines=%d/raw", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			ttl := benchInterval(time.Minute)
			runWorkers(b, env.pool, n, func(_, i int) error {
				req := protocol.AcquireRequest{Key: key(fmt.Sprintf("k-%d", i)), Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()}
				return rawRow(env, rawAcquireSQL, "ns", req.Key.Name, req.Owner, ttl, req.RequestID, backendkit.Fingerprint(req))
			})
		})
	}
}

// holdKeys acquires one key per worker, before the timer starts, and
// returns the tokens.
func holdKeys(b *testing.B, env benchEnv, n int) []int64 {
	b.Helper()
	tokens := make([]int64, n)
	for w := range n {
		ctx, cancel := benchCtx()
		res, err := env.b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("w-%d", w)), Owner: "o", TTL: time.Hour, RequestID: fmt.Sprintf("hold-%d", w)})
		cancel()
		if err := wantBench(res, err, protocol.StatusAcquired); err != nil {
			b.Fatal(err)
		}
		tokens[w] = res.Lease.Token
	}
	return tokens
}

func BenchmarkRenew(b *testing.B) {
	for _, n := range benchConcurrency {
		b.Run(fmt.Sprintf("goroutines=%d/backend", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			tokens := holdKeys(b, env, n)
			runWorkers(b, env.b.Pool(), n, func(w, i int) error {
				ctx, cancel := benchCtx()
				defer cancel()
				res, err := env.b.Renew(ctx, protocol.RenewRequest{
					Key: key(fmt.Sprintf("w-%d", w)), Owner: "o", Token: tokens[w], TTL: time.Hour, RequestID: protocol.RandomRequestID(),
				})
				return wantBench(res, err, protocol.StatusRenewed)
			})
		})
		b.Run(fmt.Sprintf("goroutines=%d/raw", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			tokens := holdKeys(b, env, n)
			ttl := benchInterval(time.Hour)
			runWorkers(b, env.pool, n, func(w, i int) error {
				req := protocol.RenewRequest{Key: key(fmt.Sprintf("w-%d", w)), Owner: "o", Token: tokens[w], TTL: time.Hour, RequestID: protocol.RandomRequestID()}
				return rawRow(env, rawRenewSQL, "ns", req.Key.Name, req.Owner, req.Token, ttl, req.RequestID, backendkit.Fingerprint(req))
			})
		})
	}
}

// seedLeases writes live leases k-0 ... k-(N-1), token i+1, owner o, for
// the b.N operations and the warm-up, in one statement before the timer
// starts.
func seedLeases(b *testing.B, env benchEnv, n int) {
	b.Helper()
	ctx, cancel := benchCtx()
	defer cancel()
	if _, err := env.pool.Exec(ctx, `INSERT INTO leasestore_leases
		SELECT 'ns', 'k-' || i, 'o', i + 1, now(), now(), now() + interval '1 hour', 1
		FROM generate_series(0, $1::int - 1) AS i`, b.N+warmUp(n)); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRelease(b *testing.B) {
	for _, n := range benchConcurrency {
		b.Run(fmt.Sprintf("goroutines=%d/backend", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			seedLeases(b, env, n)
			runWorkers(b, env.b.Pool(), n, func(_, i int) error {
				ctx, cancel := benchCtx()
				defer cancel()
				res, err := env.b.Release(ctx, protocol.ReleaseRequest{
					Key: key(fmt.Sprintf("k-%d", i)), Owner: "o", Token: int64(i + 1), RequestID: protocol.RandomRequestID(),
				})
				return wantBench(res, err, protocol.StatusReleased)
			})
		})
		b.Run(fmt.Sprintf("goroutines=%d/raw", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			seedLeases(b, env, n)
			runWorkers(b, env.pool, n, func(_, i int) error {
				req := protocol.ReleaseRequest{Key: key(fmt.Sprintf("k-%d", i)), Owner: "o", Token: int64(i + 1), RequestID: protocol.RandomRequestID()}
				return rawRow(env, rawReleaseSQL, "ns", req.Key.Name, req.Owner, req.Token, req.RequestID, backendkit.Fingerprint(req))
			})
		})
	}
}
