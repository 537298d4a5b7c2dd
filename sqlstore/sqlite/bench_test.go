package sqlite

// Benchmarks of the backend (through protocol.Runtime, as callers use it)
// beside a raw baseline: the same statements (the constants of queries.go)
// in the same transaction shape (look-up, conditional statement, fencing
// bump for acquire, audit insert) issued directly on a *sql.DB from OpenDB,
// with no protocol layer. Each runs at 1 and 8 goroutines; the goroutine
// count is exact (not a multiple of GOMAXPROCS): G goroutines share b.N
// operations.
//
//	go test -run '^$' -bench . -benchtime 2s ./sqlstore/sqlite/

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

var benchGoroutines = []int{1, 8}

const benchTTL = time.Hour

// benchFile returns a fresh migrated file, and a *sql.DB on it.
func benchFile(b *testing.B) (string, *sql.DB) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := OpenDB(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if _, err := migrations.Up(context.Background(), migrations.SQLite, db); err != nil {
		b.Fatal(err)
	}
	return path, db
}

// runConcurrent runs op b.N times in total from exactly g goroutines and
// reports the throughput, the 50th and 99th percentile and the maximum
// latency. op gets
// the goroutine's number and the operation's index in [0, b.N).
func runConcurrent(b *testing.B, g int, op func(ctx context.Context, worker, i int) error) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var once sync.Once
	var failure error
	var wg sync.WaitGroup
	lat := make([][]time.Duration, g)
	b.ResetTimer()
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					once.Do(func() { failure = err })
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
}

// preload inserts n live leases ("k<i>", owner "w", token i+1) in one
// transaction, for renew and release to act on.
func preload(b *testing.B, db *sql.DB, n int) {
	b.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	now := time.Now()
	st, err := tx.PrepareContext(ctx, `INSERT INTO leasestore_leases
		(namespace, name, owner, token, acquired_at, renewed_at, expires_at, version) VALUES ('b', ?1, 'w', ?2, ?3, ?3, ?4, 1)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := st.ExecContext(ctx, "k"+strconv.Itoa(i), i+1, micros(now), micros(now.Add(benchTTL))); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE leasestore_fencing SET last_token = ?1 WHERE id = 1`, n); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func benchRuntime(b *testing.B, path string) *protocol.Runtime {
	b.Helper()
	be, err := Open(context.Background(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	rt := protocol.New(be, nil)
	b.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// raw is the baseline: prepared statements on a *sql.DB from OpenDB.
type raw struct {
	db                                               *sql.DB
	find, acquire, bump, renew, release, insertAudit *sql.Stmt
}

func newRaw(b *testing.B, db *sql.DB) *raw {
	b.Helper()
	r := &raw{db: db}
	for _, s := range []struct {
		p **sql.Stmt
		q string
	}{{&r.find, qFindRequest}, {&r.acquire, qAcquire}, {&r.bump, qBumpFencing}, {&r.renew, qRenew},
		{&r.release, qRelease}, {&r.insertAudit, qInsertAudit}} {
		st, err := db.Prepare(s.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		*s.p = st
	}
	return r
}

// tx runs body in a transaction after the idempotency look-up, then inserts
// the audit record body returns and commits.
func (r *raw) tx(ctx context.Context, ns, op string, body func(tx *sql.Tx, now int64) (name, owner string, token int64, exp sql.NullInt64, err error)) error {
	// A deadline, as the runtime gives every backend call: with one,
	// database/sql and the driver watch the context during the transaction.
	ctx, cancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer cancel()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	// The runtime's request ids: random ones land anywhere in the audit
	// trail's (namespace, request_id) index, sequential ones would append.
	rid := protocol.RandomRequestID()
	var id int64
	var dummy any
	err = tx.StmtContext(ctx, r.find).QueryRowContext(ctx, ns, rid).Scan(&id, &dummy, &dummy, &dummy, &dummy, &dummy,
		&dummy, &dummy, &dummy, &dummy, &dummy, &dummy, &dummy, &dummy)
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("look-up: %v", err)
	}
	now := time.Now().UnixMicro()
	name, owner, token, exp, err := body(tx, now)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, r.insertAudit).ExecContext(ctx, now, op, ns, name, owner, token, rid, owner, "",
		op+"d", audit.RecordFormatVersion, "hash", exp, now, now); err != nil {
		return err
	}
	return tx.Commit()
}

func BenchmarkAcquire(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("g=%d/backend", g), func(b *testing.B) {
			path, _ := benchFile(b)
			rt := benchRuntime(b, path)
			runConcurrent(b, g, func(ctx context.Context, _, i int) error {
				_, err := rt.Acquire(ctx, protocol.AcquireRequest{
					Key: protocol.Key{Namespace: "b", Name: "k" + strconv.Itoa(i)}, Owner: "w", TTL: benchTTL})
				return err
			})
		})
		b.Run(fmt.Sprintf("g=%d/raw", g), func(b *testing.B) {
			_, db := benchFile(b)
			r := newRaw(b, db)
			runConcurrent(b, g, func(ctx context.Context, _, i int) error {
				return r.tx(ctx, "b", "acquire", func(tx *sql.Tx, now int64) (string, string, int64, sql.NullInt64, error) {
					name := "k" + strconv.Itoa(i)
					exp := now + benchTTL.Microseconds()
					var token, last int64
					if err := tx.StmtContext(ctx, r.acquire).QueryRowContext(ctx, "b", name, "w", now, exp, 1, 0).Scan(&token); err != nil {
						return "", "", 0, sql.NullInt64{}, err
					}
					if err := tx.StmtContext(ctx, r.bump).QueryRowContext(ctx).Scan(&last); err != nil {
						return "", "", 0, sql.NullInt64{}, err
					}
					return name, "w", token, sql.NullInt64{Int64: exp, Valid: true}, nil
				})
			})
		})
	}
}

func BenchmarkRenew(b *testing.B) {
	for _, g := range benchGoroutines {
		// Each goroutine renews a lease of its own, over and over.
		b.Run(fmt.Sprintf("g=%d/backend", g), func(b *testing.B) {
			path, db := benchFile(b)
			preload(b, db, g)
			rt := benchRuntime(b, path)
			runConcurrent(b, g, func(ctx context.Context, w, _ int) error {
				_, err := rt.Renew(ctx, protocol.RenewRequest{
					Key: protocol.Key{Namespace: "b", Name: "k" + strconv.Itoa(w)}, Owner: "w", Token: int64(w + 1), TTL: benchTTL})
				return err
			})
		})
		b.Run(fmt.Sprintf("g=%d/raw", g), func(b *testing.B) {
			_, db := benchFile(b)
			preload(b, db, g)
			r := newRaw(b, db)
			runConcurrent(b, g, func(ctx context.Context, w, _ int) error {
				return r.tx(ctx, "b", "renew", func(tx *sql.Tx, now int64) (string, string, int64, sql.NullInt64, error) {
					name := "k" + strconv.Itoa(w)
					exp := now + benchTTL.Microseconds()
					var acq, newExp, delay int64
					if err := tx.StmtContext(ctx, r.renew).QueryRowContext(ctx, "b", name, "w", w+1, now, benchTTL.Microseconds(), 1).Scan(&acq, &newExp, &delay); err != nil {
						return "", "", 0, sql.NullInt64{}, err
					}
					return name, "w", int64(w + 1), sql.NullInt64{Int64: exp, Valid: true}, nil
				})
			})
		})
	}
}

func BenchmarkRelease(b *testing.B) {
	for _, g := range benchGoroutines {
		// Operation i releases lease "k<i>", preloaded with token i+1.
		b.Run(fmt.Sprintf("g=%d/backend", g), func(b *testing.B) {
			path, db := benchFile(b)
			preload(b, db, b.N)
			rt := benchRuntime(b, path)
			runConcurrent(b, g, func(ctx context.Context, _, i int) error {
				_, err := rt.Release(ctx, protocol.ReleaseRequest{
					Key: protocol.Key{Namespace: "b", Name: "k" + strconv.Itoa(i)}, Owner: "w", Token: int64(i + 1)})
				return err
			})
		})
		b.Run(fmt.Sprintf("g=%d/raw", g), func(b *testing.B) {
			_, db := benchFile(b)
			preload(b, db, b.N)
			r := newRaw(b, db)
			runConcurrent(b, g, func(ctx context.Context, _, i int) error {
				return r.tx(ctx, "b", "release", func(tx *sql.Tx, now int64) (string, string, int64, sql.NullInt64, error) {
					name := "k" + strconv.Itoa(i)
					var acq, ren, exp, delay int64
					if err := tx.StmtContext(ctx, r.release).QueryRowContext(ctx, "b", name, "w", i+1, now, 1).Scan(&acq, &ren, &exp, &delay); err != nil {
						return "", "", 0, sql.NullInt64{}, err
					}
					return name, "w", int64(i + 1), sql.NullInt64{}, nil
				})
			})
		})
	}
}

// BenchmarkGet reads one of g live leases per call, through the runtime:
// the read path alone (no write transaction), with its file check.
func BenchmarkGet(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("g=%d/backend", g), func(b *testing.B) {
			path, db := benchFile(b)
			preload(b, db, g)
			rt := benchRuntime(b, path)
			runConcurrent(b, g, func(ctx context.Context, w, _ int) error {
				res, err := rt.Get(ctx, protocol.GetRequest{Key: protocol.Key{Namespace: "b", Name: "k" + strconv.Itoa(w)}})
				if err == nil && res.Lease == nil {
					err = fmt.Errorf("get k%d: no lease", w)
				}
				return err
			})
		})
	}
}
