package sqlite_test

// BenchmarkCycle is bench/peers' SQLite workload as a go test benchmark,
// for profiles (-cpuprofile, -memprofile) and allocation counts: callers
// in a closed loop acquire a random key of 100k and release it, through
// the backend (protocol.Runtime over sqlite.Open, coalescing as shipped)
// and through the raw one-transaction loop of cmd/leasectl/rawbench. One
// iteration is one cycle (two operations when the acquire took the key);
// ops/s counts operations. The backend's runs also report the writes per
// coalesced transaction (writes/batch, over the transactions that held
// more than one write) and those transactions per cycle. cpu-µs/op is the
// process's CPU time (user and system, where the platform tells it) per
// operation: less subject than ops/s to what else the machine runs.
//
//	go test -run '^$' -bench Cycle -benchmem ./sqlstore/sqlite/

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/cmd/leasectl/rawbench"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

const cycleKeys = 100000

// cycler is one subject: acquire answers the token and whether it took
// the key; release gives it back.
type cycler struct {
	acquire func(ctx context.Context, name, owner string) (int64, bool, error)
	release func(ctx context.Context, name, owner string, token int64) error
}

// runCycles runs b.N cycles of c from exactly g goroutines and reports
// operations per second; it returns the operations run.
func runCycles(b *testing.B, g int, c cycler) int64 {
	b.Helper()
	var next, ops atomic.Int64
	var once sync.Once
	var failure error
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	cpu0, cpuOK := processCPU()
	for w := range g {
		wg.Go(func() {
			ctx := context.Background()
			owner := "w" + strconv.Itoa(w)
			r := rand.New(rand.NewPCG(uint64(w), 25))
			for next.Add(1) <= int64(b.N) {
				name := "k" + strconv.Itoa(r.IntN(cycleKeys))
				tok, ok, err := c.acquire(ctx, name, owner)
				if err == nil && ok {
					ops.Add(1)
					err = c.release(ctx, name, owner, tok)
				}
				if err != nil {
					once.Do(func() { failure = err })
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	b.ReportMetric(float64(ops.Load())/elapsed.Seconds(), "ops/s")
	if cpuOK && ops.Load() > 0 {
		// The process's, the benchmark's callers and the store's writer together.
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(ops.Load()), "cpu-µs/op")
	}
	return ops.Load()
}

func BenchmarkCycle(b *testing.B) {
	const ttl = 30 * time.Second
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("g=%d/backend", g), func(b *testing.B) {
			be := open(b, migratedFile(b), nil)
			rt := protocol.New(be, nil)
			b.Cleanup(func() { _ = rt.Close(context.Background()) })
			before := sqlite.WriteBatches(be)
			batchedBefore := sqlite.WriteBatchWrites(be)
			runCycles(b, g, cycler{
				acquire: func(ctx context.Context, name, owner string) (int64, bool, error) {
					res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bench", Name: name}, Owner: owner, TTL: ttl})
					if res.Status == protocol.StatusConflict {
						return 0, false, nil
					}
					if err != nil {
						return 0, false, err
					}
					return res.Lease.Token, true, nil
				},
				release: func(ctx context.Context, name, owner string, token int64) error {
					_, err := rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: "bench", Name: name}, Owner: owner, Token: token})
					return err
				},
			})
			batches := sqlite.WriteBatches(be) - before
			writes := sqlite.WriteBatchWrites(be) - batchedBefore
			if batches > 0 {
				b.ReportMetric(float64(writes)/float64(batches), "writes/batch")
			}
			b.ReportMetric(float64(batches)/float64(b.N), "batches/cycle")
		})
		b.Run(fmt.Sprintf("g=%d/raw", g), func(b *testing.B) {
			raw, err := rawbench.OpenSQLite(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = raw.Close(context.Background()) })
			runCycles(b, g, cycler{
				acquire: func(ctx context.Context, name, owner string) (int64, bool, error) {
					return raw.Acquire(ctx, name, owner, ttl)
				},
				release: func(ctx context.Context, name, owner string, token int64) error {
					_, err := raw.Release(ctx, name, owner, token)
					return err
				},
			})
		})
	}
}
