package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// BenchmarkWritePath compares, in one run, the write path of the first
// release (schema version 1 and its statements, verbatim: audit ids from
// transaction ids behind a per-key lock, four audit indexes, random request
// ids, 64-digit fingerprints) with the current one (the backend on the
// current schema: a BRIN index for time, time-ordered request ids, shorter
// fingerprints). Each op is an acquire-release cycle on a random key of
// 100,000; ns/op is per protocol operation (a cycle is two).
//
// Each pair runs twice: on tables never analyzed, as on a server with
// autovacuum off (the planner, without statistics, reads a key's row
// through a bitmap scan), and "analyzed": after 4,000 cycles and an
// ANALYZE, as autovacuum leaves them (a plain index scan).
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench WritePath -benchtime 10000x ./sqlstore/postgres/
func BenchmarkWritePath(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	for _, n := range benchConcurrency {
		for _, stats := range []string{"", "-analyzed"} {
			b.Run(fmt.Sprintf("goroutines=%d/v1%s", n, stats), func(b *testing.B) {
				dsn := pgtest.DSN(b)
				p, err := migrations.NewProvider(context.Background(), migrations.Postgres, sqlDB(b, dsn))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.UpTo(context.Background(), 1); err != nil {
					b.Fatal(err)
				}
				pool := rawPoolN(b, dsn, n)
				c := &v1Client{pool: pool, owner: "bench"}
				cycle := func() error {
					ctx, cancel := benchCtx()
					defer cancel()
					_, err := c.cycleRandom(ctx, fmt.Sprintf("k%d", rand.N(100_000)))
					return err
				}
				if stats != "" {
					analyzeAfter(b, pool, cycle)
				}
				runWorkers(b, pool, n, func(_, i int) error {
					if i%2 == 1 {
						return nil // the release of the cycle counted at i-1
					}
					return cycle()
				})
			})
			b.Run(fmt.Sprintf("goroutines=%d/current%s", n, stats), func(b *testing.B) {
				e := newBenchEnv(b, n)
				cycle := func() error {
					ctx, cancel := benchCtx()
					defer cancel()
					k := protocol.Key{Namespace: "ns", Name: fmt.Sprintf("k%d", rand.N(100_000))}
					res, err := e.b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "bench", TTL: time.Minute, RequestID: protocol.NewRequestID()})
					if err != nil || res.Status != protocol.StatusAcquired {
						return err
					}
					_, err = e.b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "bench", Token: res.Lease.Token, RequestID: protocol.NewRequestID()})
					return err
				}
				if stats != "" {
					analyzeAfter(b, e.pool, cycle)
				}
				// The backend's own pool, so that the server CPU of its
				// connections is what gets measured.
				runWorkers(b, e.b.Pool(), n, func(_, i int) error {
					if i%2 == 1 {
						return nil
					}
					return cycle()
				})
			})
		}
	}
}

// analyzeAfter runs 4,000 cycles and then ANALYZE on the tables, as
// autovacuum would once they changed that much.
func analyzeAfter(b *testing.B, pool *pgxpool.Pool, cycle func() error) {
	b.Helper()
	for range 4000 {
		if err := cycle(); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := benchCtx()
	defer cancel()
	if _, err := pool.Exec(ctx, "ANALYZE leasestore_leases; ANALYZE leasestore_audit"); err != nil {
		b.Fatal(err)
	}
}

// rawPoolN opens a plain pool of n connections on dsn, closed when the
// benchmark ends.
func rawPoolN(b *testing.B, dsn string, n int) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(n)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// cycleRandom is cycle with random request ids and a 64-digit fingerprint,
// as the first release's runtime sent them.
func (c *v1Client) cycleRandom(ctx context.Context, name string) (int64, error) {
	return c.cycleWith(ctx, name, protocol.RandomRequestID(), protocol.RandomRequestID(),
		protocol.RandomRequestID()+protocol.RandomRequestID())
}

// trailEnv names how many records BenchmarkAuditReads puts in its trail.
const trailEnv = "LEASESTORE_BENCH_TRAIL"

// BenchmarkAuditReads reads a long trail (10,000,000 records unless
// LEASESTORE_BENCH_TRAIL says otherwise; 100,000 keys, one record every
// 10 ms of the trail's time span, the newest now) through the backend: the
// first page of one key's trail, a page of it after a cursor deep in it,
// the first page since 10 minutes, an hour and a day ago, and a
// follower's page near the head. Filling the trail takes a few minutes at full size.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench AuditReads -benchtime 200x ./sqlstore/postgres/
func BenchmarkAuditReads(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	n := 10_000_000
	if v, err := strconv.Atoi(os.Getenv(trailEnv)); err == nil && v > 0 {
		n = v
	}
	dsn := pgtest.MigratedDSN(b)
	raw := rawPool(b, dsn)
	fill := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	// Raw rows as the backend writes them (the triggers allow INSERT).
	// Ids below the current transaction ids' era would make the backend
	// start a new era at open; these ids are far above, which it accepts.
	if _, err := raw.Exec(ctx, `
		INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		                              status, version, params_hash, expires_at, acquired_at, renewed_at)
		SELECT i, now() - (($1 - i) * interval '10 milliseconds'), 'renew', 'bench', 'k' || (i % 100000), 'w',
		       i, 'r' || i, 'w', '', 'renewed', 1, md5(i::text), now(), now(), now()
		FROM generate_series(1, $1::bigint) AS i`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := raw.Exec(ctx, "VACUUM ANALYZE leasestore_audit"); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled a trail of %d records in %v", n, time.Since(fill).Round(time.Second))
	backend := openBackend(b, dsn, nil)
	deep := audit.EncodeCursor(int64(n / 2))
	for _, c := range []struct {
		name string
		q    func() audit.Query
	}{
		{"key_first_page", func() audit.Query {
			return audit.Query{Namespace: "bench", Key: fmt.Sprintf("k%d", rand.N(100_000))}
		}},
		{"key_deep_page", func() audit.Query {
			return audit.Query{Namespace: "bench", Key: fmt.Sprintf("k%d", rand.N(100_000)), Cursor: deep}
		}},
		{"since_10m", func() audit.Query {
			return audit.Query{Namespace: "bench", Since: time.Now().Add(-10 * time.Minute)}
		}},
		{"since_1h", func() audit.Query {
			return audit.Query{Namespace: "bench", Since: time.Now().Add(-time.Hour)}
		}},
		{"since_24h", func() audit.Query {
			return audit.Query{Namespace: "bench", Since: time.Now().Add(-24 * time.Hour)}
		}},
		{"follower_head", func() audit.Query {
			return audit.Query{Follow: true, Cursor: audit.EncodeCursor(int64(n - 50))}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := benchCtx()
				p, err := backend.ReadAudit(ctx, c.q())
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Records) == 0 {
					b.Fatalf("%s: empty page", c.name)
				}
			}
		})
	}
}

// BenchmarkSinceStart finds where a read of the records since a time
// starts, on a trail of 1,000,000 records (unless LEASESTORE_BENCH_TRAIL
// says otherwise; one record every 10 ms of the trail's time span, the
// newest now), 10 minutes, an hour and two hours back: the backend's
// statement (a binary search over ids, then the check, through the BRIN
// indexes on times and ids, that no record at or before the id it found
// is at or after the time), beside the raw statements it grew from, run
// on the same trail: the search alone ("search_only", which misses
// records after the server's clock stepped back) and the search with the
// check through the time index alone ("time_index_check": the id index
// dropped for it, then built again). The "stepped" cases read a trail
// whose clock stepped back an hour a third of the way along it.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench SinceStart -benchtime 2000x ./sqlstore/postgres/
func BenchmarkSinceStart(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv(trailEnv)); err == nil && v > 0 {
		n = v
	}
	for _, stepped := range []bool{false, true} {
		dsn := pgtest.MigratedDSN(b)
		raw := rawPool(b, dsn)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		// Stepped: the records after the first third are an hour older
		// than their place says.
		step := int64(0)
		if stepped {
			step = int64(n / 3)
		}
		if _, err := raw.Exec(ctx, `
			INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
			                              status, version, params_hash, expires_at, acquired_at, renewed_at)
			SELECT i, now() - (($1 - i) * interval '10 milliseconds') - CASE WHEN $2 > 0 AND i > $2 THEN interval '1 hour' ELSE interval '0' END,
			       'renew', 'bench', 'k' || (i % 100000), 'w', i, 'r' || i, 'w', '', 'renewed', 1, md5(i::text), now(), now(), now()
			FROM generate_series(1, $1::bigint) AS i`, n, step); err != nil {
			cancel()
			b.Fatal(err)
		}
		if _, err := raw.Exec(ctx, "VACUUM ANALYZE leasestore_audit"); err != nil {
			cancel()
			b.Fatal(err)
		}
		cancel()
		backend := openBackend(b, dsn, nil)
		statements := []struct {
			name string
			run  func(ctx context.Context, since time.Time) (int64, error)
		}{
			{"backend", backend.SinceStart},
			{"search_only", func(ctx context.Context, since time.Time) (int64, error) {
				var start int64
				err := raw.QueryRow(ctx, searchOnlySQL, since, "1 minute").Scan(&start)
				return start, err
			}},
			{"time_index_check", func(ctx context.Context, since time.Time) (int64, error) {
				var start int64
				err := raw.QueryRow(ctx, timeIndexCheckSQL, since, "1 minute").Scan(&start)
				return start, err
			}},
		}
		for _, back := range []time.Duration{10 * time.Minute, time.Hour, 2 * time.Hour} {
			for _, st := range statements {
				name := fmt.Sprintf("stepped=%v/back=%v/%s", stepped, back, st.name)
				b.Run(name, func(b *testing.B) {
					if st.name == "time_index_check" {
						ctx, cancel := benchCtx()
						defer cancel()
						if _, err := raw.Exec(ctx, "DROP INDEX leasestore_audit_id_brin"); err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() {
							ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
							defer cancel()
							if _, err := raw.Exec(ctx, "CREATE INDEX leasestore_audit_id_brin ON leasestore_audit USING brin (id) WITH (autosummarize = on)"); err != nil {
								b.Fatal(err)
							}
						})
					}
					since := time.Now().Add(-back)
					for b.Loop() {
						ctx, cancel := benchCtx()
						_, err := st.run(ctx, since)
						cancel()
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// searchOnlySQL is the since read's start as schema 11's release found it:
// the binary search alone ($1 since, $2 slack).
const searchOnlySQL = `
WITH RECURSIVE search AS (
    SELECT e.lo, e.hi, 0 AS step
    FROM (SELECT (SELECT min(id) FROM leasestore_audit) AS lo, (SELECT max(id) FROM leasestore_audit) + 1 AS hi) AS e
    WHERE e.lo IS NOT NULL
      AND (SELECT a.at FROM leasestore_audit a WHERE a.id = e.lo) < $1::timestamptz - $2::interval
    UNION ALL
    SELECT CASE WHEN m.at < $1::timestamptz - $2::interval THEN m.id ELSE s.lo END,
           CASE WHEN m.at < $1::timestamptz - $2::interval THEN s.hi ELSE s.lo + (s.hi - s.lo) / 2 END,
           s.step + 1
    FROM search s
    CROSS JOIN LATERAL (SELECT a.id, a.at FROM leasestore_audit a
                        WHERE a.id >= s.lo + (s.hi - s.lo) / 2 ORDER BY a.id LIMIT 1) AS m
    WHERE s.hi - s.lo > 1 AND s.step < 100
)
SELECT coalesce((SELECT lo FROM search ORDER BY step DESC LIMIT 1), 0)`

// timeIndexCheckSQL is the complete start without an index on ids: the
// first record at or after $1 through the time index, which reads every
// record since then.
const timeIndexCheckSQL = `
SELECT coalesce((SELECT min(a.id) FILTER (WHERE true) - 1 FROM leasestore_audit a WHERE a.at >= $1::timestamptz),
                (SELECT max(id) FROM leasestore_audit), 0)
WHERE $2::interval IS NOT NULL`
