package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/wakebench"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// BenchmarkReleaseWake measures what waking waiters costs the write path.
// Goroutines run acquire-release cycles, each on keys of its own, and
// take turns between three kinds of release, interleaved so that all three
// see the same load on a shared machine:
//
//   - without_wake: the release statement stripped of its wake CTE (the
//     statement as it was before blocking acquire), the baseline;
//   - nobody_waits: the release statement as shipped, on keys nobody
//     waits for: it pays one pg_try_advisory_xact_lock that succeeds;
//   - someone_waits: as shipped, on keys another backend (its own pool
//     and listener connection) waits for: each release sends NOTIFY.
//
// It reports each kind's mean and median release latency (µs) and the
// ratio of each mean to the baseline's.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench ReleaseWake -benchtime 3000x ./sqlstore/postgres/
func BenchmarkReleaseWake(b *testing.B) {
	const keysPerKind = 8 // per goroutine
	kinds := []string{"without_wake", "nobody_waits", "someone_waits"}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("c=%d", n), func(b *testing.B) {
			if os.Getenv(pgtest.EnvDSN) == "" {
				b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
			}
			dsn := pgtest.MigratedDSN(b)
			// Without coalescing, so that each release is the statement
			// measured (a coalesced batch wakes waiters the same way, in
			// leasestore_change_batch, whatever the statement).
			backend := openBackend(b, dsn, &postgres.Config{MaxConns: int32(max(n, 2)), NoCoalescing: true})
			waiter := openBackend(b, dsn, &postgres.Config{MaxConns: 2})
			keyOf := func(kind, w, i int) protocol.Key {
				return key(fmt.Sprintf("%s/%d/%d", kinds[kind], w, i%keysPerKind))
			}
			for w := range n {
				for i := range keysPerKind {
					_, cancel, err := waiter.Subscribe(context.Background(), keyOf(2, w, i))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(cancel)
				}
			}
			var mu sync.Mutex
			took := make([][]time.Duration, len(kinds))
			counts := make([]int, n)
			runWorkers(b, backend.Pool(), n, func(w, _ int) error {
				c := counts[w]
				counts[w]++
				kind := c % len(kinds)
				k := keyOf(kind, w, c/len(kinds))
				ctx, cancel := benchCtx()
				defer cancel()
				res, err := backend.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
				if err := wantBench(res, err, protocol.StatusAcquired); err != nil {
					return err
				}
				release := backend.Release
				if kind == 0 {
					release = backend.ReleaseWithoutWake
				}
				t0 := time.Now()
				res, err = release(ctx, protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token, RequestID: protocol.RandomRequestID()})
				d := time.Since(t0)
				mu.Lock()
				took[kind] = append(took[kind], d) // the warm-up's few included
				mu.Unlock()
				return wantBench(res, err, protocol.StatusReleased)
			})
			means := make([]float64, len(kinds))
			for kind, ds := range took {
				if len(ds) == 0 {
					continue
				}
				var sum time.Duration
				for _, d := range ds {
					sum += d
				}
				means[kind] = float64(sum) / float64(len(ds)) / float64(time.Microsecond)
				slices.Sort(ds)
				b.ReportMetric(means[kind], kinds[kind]+"-mean-us")
				b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Microsecond), kinds[kind]+"-p50-us")
			}
			if means[0] > 0 {
				b.ReportMetric(means[1]/means[0], "nobody/without")
				b.ReportMetric(means[2]/means[0], "someone/without")
			}
		})
	}
}

// BenchmarkWakeUp measures how soon a waiter takes a key after another
// pool (as another process would) released it: wake-p50-ms and
// wake-p99-ms, from the release's return to the waiter's acquire
// returning, through LISTEN/NOTIFY. acquire-p50-ms is a plain acquire of a
// free key in the same run, the floor any hand-over pays.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench WakeUp -benchtime 300x ./sqlstore/postgres/
func BenchmarkWakeUp(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	dsn := pgtest.MigratedDSN(b)
	wakebench.Run(b, protocol.New(openBackend(b, dsn, nil), nil), protocol.New(openBackend(b, dsn, nil), nil))
}

// BenchmarkWakeUpOverHTTP is BenchmarkWakeUp through the HTTP API: the
// waiter and the holder each talk to a server of their own (on a loopback
// port) serving its own pool, so a release goes client → server →
// PostgreSQL, its NOTIFY reaches the waiter's server, then the waiter's
// client as an event of its notification stream, and the waiter's acquire
// goes client → server.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench WakeUpOverHTTP -benchtime 100x ./sqlstore/postgres/
func BenchmarkWakeUpOverHTTP(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	dsn := pgtest.MigratedDSN(b)
	serve := func() *protocol.Runtime {
		rt := protocol.New(httpcontract.Serve(b, openBackend(b, dsn, nil), nil), nil)
		b.Cleanup(func() { _ = rt.Close(context.Background()) })
		return rt
	}
	wakebench.Run(b, serve(), serve())
}

// BenchmarkReleaseFirstUse measures what `leasectl run` pays at its
// release, which is the first time its process runs the release statement:
// each iteration opens a backend (a fresh pool), acquires a key and times
// its release (the statement is prepared on that use: one more round trip
// and the server's parse), then acquires and releases a second key and
// times that release (prepared). first-p50-ms and prepared-p50-ms are
// their medians, interleaved so that both see the same load.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench ReleaseFirstUse -benchtime 25x ./sqlstore/postgres/
func BenchmarkReleaseFirstUse(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	dsn := pgtest.MigratedDSN(b)
	ctx := context.Background()
	var first, prepared []time.Duration
	for i := 0; b.Loop(); i++ {
		be, err := postgres.Open(ctx, dsn, nil)
		if err != nil {
			b.Fatal(err)
		}
		rt := protocol.New(be, nil)
		for j, out := range []*[]time.Duration{&first, &prepared} {
			k := protocol.Key{Namespace: "ns", Name: fmt.Sprintf("k%d-%d", i, j)}
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token}); err != nil {
				b.Fatal(err)
			}
			*out = append(*out, time.Since(start))
		}
		if err := rt.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for name, ds := range map[string][]time.Duration{"first": first, "prepared": prepared} {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), name+"-p50-ms")
	}
}

// BenchmarkLossHeard measures how soon a holder (protocol.Hold) hears that
// another pool revoked its lease: loss-p50-ms and loss-p99-ms, from the
// revoke's return to the Held's context ending, through LISTEN/NOTIFY and
// a confirming get, with the holder renewing every 20 s; directly and over
// the HTTP API (each side with a server of its own); a Hold (hold) and
// a scheduler handler (scheduler).
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench LossHeard -benchtime 100x ./sqlstore/postgres/
func BenchmarkLossHeard(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	for _, mode := range []string{"other_pool", "over_http"} {
		b.Run(mode, func(b *testing.B) {
			dsn := pgtest.MigratedDSN(b)
			open := func() *protocol.Runtime {
				be := openBackend(b, dsn, nil)
				var rt *protocol.Runtime
				if mode == "over_http" {
					rt = protocol.New(httpcontract.Serve(b, be, nil), nil)
				} else {
					rt = protocol.New(be, nil)
				}
				b.Cleanup(func() { _ = rt.Close(context.Background()) })
				return rt
			}
			holder, revoker := open(), open()
			b.Run("hold", func(b *testing.B) { wakebench.RunLoss(b, holder, revoker) })
			b.Run("scheduler", func(b *testing.B) { wakebench.RunSchedulerLoss(b, holder, revoker) })
		})
	}
}
