package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// churnEnv sets how long TestChurnKeepsRowsBounded runs (default 6s; the
// scale issue's soak is several minutes: LEASESTORE_CHURN=5m).
const churnEnv = "LEASESTORE_CHURN"

const (
	churnMinJobs = 3000
	churnMaxRun  = time.Minute
)

// TestChurnKeepsRowsBounded acquires a unique key per job (job/<n>) and
// never releases one, as services that let leases run out do, with short
// leases and the runtime's background sweep: the table must not grow with
// the number of jobs, only with the leases that are live or just ended.
// On a loaded machine it runs past its time until churnMinJobs jobs (up
// to churnMaxRun), so that a slow run still has enough jobs for the bound
// to say something: a sweep that falls behind by a second or two passes,
// one that does not remove rows does not.
func TestChurnKeepsRowsBounded(t *testing.T) {
	t.Parallel()
	runFor := 6 * time.Second
	if d, err := time.ParseDuration(os.Getenv(churnEnv)); err == nil && d > 0 {
		runFor = d
	}
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	rt := protocol.New(b, &protocol.Config{Sweep: &protocol.SweepConfig{Every: 50 * time.Millisecond, Grace: time.Nanosecond}})
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	raw := rawPool(t, dsn)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), max(runFor, churnMaxRun))
	defer cancel()
	var (
		jobs    atomic.Int64
		wg      sync.WaitGroup
		most    int
		stopped atomic.Bool // the run ended: an acquire failing now is not a failure
	)
	for w := range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := jobs.Add(1)
				_, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "jobs", Name: fmt.Sprintf("job/%d-%d", w, n)},
					Owner: "worker", TTL: 20 * time.Millisecond})
				// An acquire that fails at the run's end is not a failure:
				// its own context (derived from ctx) may say so before ctx
				// does (CI saw "the deadline passed" with ctx.Err() nil).
				if err != nil && !stopped.Load() {
					t.Errorf("acquire: %v", err)
					return
				}
			}
		})
	}
	for ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		most = max(most, count(t, raw, "SELECT count(*) FROM leasestore_leases"))
		if time.Since(start) >= runFor && jobs.Load() >= churnMinJobs {
			break
		}
	}
	stopped.Store(true)
	cancel()
	wg.Wait()
	total := int(jobs.Load())
	t.Logf("%d jobs in %v; at most %d rows at a time", total, time.Since(start).Round(time.Millisecond), most)
	if total < 500 {
		t.Fatalf("only %d jobs: too few to show anything", total)
	}
	if most > total/5 {
		t.Fatalf("%d rows at one time for %d jobs: the sweep does not keep up", most, total)
	}
}
