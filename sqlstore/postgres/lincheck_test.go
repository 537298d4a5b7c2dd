package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// lincheckRun is a lincheck workload over several pools of one schema, as
// several processes would have them.
type lincheckRun struct {
	dsn     string // the migrated schema
	app     string // application_name of every pool, to find their connections
	pools   int
	clients int // per pool
	ops     int // per pool
	// RetryFor, RetryDelay, Think and LoseAnswers of the workloads; zero
	// for the defaults.
	retryFor, retryDelay, think time.Duration
	loseAnswers                 float64
	// attemptTimeout is the workloads' AttemptTimeout; zero for the default.
	attemptTimeout time.Duration
	// sweep, when set, is every runtime's background sweep.
	sweep *protocol.SweepConfig
	// observer, when set, is every runtime's observer.
	observer protocol.Observer
	// inFlight is every backend's Config.MaxInFlight; 0 means 1, so that
	// any two clients of a pool that overlap are coalesced into one batch.
	inFlight int
	// noCoalescing turns coalescing off.
	noCoalescing bool
	// backends are the runtimes' backends, set by open.
	backends *[]*postgres.Backend
}

// batches returns how many batches of more than one operation the
// backends sent, and how many operations they held.
func (r lincheckRun) batches() (batches, ops int64) {
	for _, b := range *r.backends {
		n, o, _ := postgres.CoalesceStats(b)
		batches += n
		ops += o
	}
	return batches, ops
}

// checkAudit checks the schema's audit trail against h (see
// [lincheck.CheckAudit]) through a pool of its own.
func (r lincheckRun) checkAudit(t *testing.T, h *lincheck.History) {
	t.Helper()
	b, err := postgres.Open(ctxT(t), r.dsn, nil)
	if err != nil {
		t.Fatalf("open a pool to read the audit trail: %v", err)
	}
	defer b.Close(context.Background())
	if err := lincheck.CheckAudit(ctxT(t), h, b); err != nil {
		t.Fatal(err)
	}
}

// open opens r.pools runtimes, each over a pool of its own; they are
// closed when the test ends (run closes them earlier).
func (r lincheckRun) open(t *testing.T) []*protocol.Runtime {
	t.Helper()
	rts := make([]*protocol.Runtime, r.pools)
	inFlight := r.inFlight
	if inFlight == 0 {
		inFlight = 1
	}
	for i := range rts {
		b, err := postgres.Open(ctxT(t), r.dsn, &postgres.Config{ApplicationName: r.app, MaxConns: int32(r.clients),
			MaxInFlight: inFlight, NoCoalescing: r.noCoalescing})
		if err != nil {
			t.Fatalf("open pool %d: %v", i, err)
		}
		if r.backends != nil {
			*r.backends = append(*r.backends, b)
		}
		rts[i] = protocol.New(b, &protocol.Config{Sweep: r.sweep, Observer: r.observer})
		t.Cleanup(func() { _ = rts[i].Close(context.Background()) })
	}
	return rts
}

// run runs one workload per runtime until each made r.ops operations or
// ctx is done, closes the runtimes and returns the merged history.
// Runtime i records as process "pool<i>".
func (r lincheckRun) run(t *testing.T, ctx context.Context, rts []*protocol.Runtime) *lincheck.History {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hist lincheck.History
	)
	for i, rt := range rts {
		rec := lincheck.NewRecorder(fmt.Sprintf("pool%d", i), nil)
		w := &lincheck.Workload{Store: rt, Recorder: rec, Clients: r.clients, Ops: r.ops,
			RetryFor: r.retryFor, RetryDelay: r.retryDelay, Think: r.think, LoseAnswers: r.loseAnswers,
			AttemptTimeout: r.attemptTimeout, LockDelay: 50 * time.Millisecond}
		wg.Go(func() {
			defer rt.Close(context.Background())
			stats, err := w.Run(ctx)
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s: %v", rec.Process(), stats)
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(rec.History())
		})
	}
	wg.Wait()
	return &hist
}

// terminator kills, at random intervals averaging every, one server
// process of the pools named app (pg_terminate_backend; one running a
// statement when there is one), from a connection of its own, until stop
// is called; stop returns how many it killed. It reconnects when its
// connection fails (the chaos test restarts the server under it).
func terminator(t *testing.T, serverDSN, app string, every time.Duration) (stop func() int) {
	t.Helper()
	var (
		killed atomic.Int64
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		for {
			select {
			case <-done:
				return
			case <-time.After(every/2 + rand.N(every)):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var err error
			if conn == nil {
				conn, err = pgx.Connect(ctx, serverDSN)
			}
			var n int64
			if err == nil {
				err = conn.QueryRow(ctx, `
					SELECT count(pg_terminate_backend(pid)) FROM (
						SELECT pid FROM pg_stat_activity WHERE application_name = $1
						ORDER BY state = 'active' DESC, random() LIMIT 1) AS victim`,
					app).Scan(&n)
			}
			cancel()
			if err != nil {
				if conn != nil {
					_ = conn.Close(context.Background())
					conn = nil
				}
				continue
			}
			killed.Add(n)
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return int(killed.Load())
	}
}

// TestLinearizableWhileConnectionsAreTerminated runs the lincheck workload
// from three pools on one schema while another connection terminates their
// server processes (pg_terminate_backend) at random, every 75ms or so (one active process when there is one). The
// clients retry what answers unavailable with the same request id (and
// throw away 2% of the answers, so that retries meet replays); the history
// must be linearizable.
func TestLinearizableWhileConnectionsAreTerminated(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	r := lincheckRun{dsn: dsn, app: "lincheck-" + appName(t), pools: 3, clients: 2, ops: 800, loseAnswers: 0.02,
		backends: new([]*postgres.Backend)}
	rts := r.open(t)
	stop := terminator(t, pgtest.ServerDSN(t), r.app, 75*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	h := r.run(t, ctx, rts)
	killed := stop()
	elapsed := time.Since(began)

	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
	batches, batched := r.batches()
	t.Logf("history: %v; %d server processes terminated in %v; %d operations in %d batches", res, killed,
		elapsed.Round(time.Millisecond), batched, batches)
	if err != nil {
		t.Fatal(err)
	}
	r.checkAudit(t, h)
	if res.Operations < 2000 {
		t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
	}
	if killed == 0 {
		t.Errorf("no connection was terminated")
	}
}

// TestLinearizableWhileSweeping runs the workload while every runtime
// sweeps the rows of ended leases every few milliseconds with no grace:
// rows vanish under acquires, renews, releases and revokes, and the history
// must still be linearizable (a holder may hear not_found for a swept
// lease, never a token issued twice or backwards).
func TestLinearizableWhileSweeping(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	var swept atomic.Int64
	r := lincheckRun{dsn: dsn, app: "lincheck-" + appName(t), pools: 3, clients: 2, ops: 800, loseAnswers: 0.02,
		backends: new([]*postgres.Backend),
		sweep:    &protocol.SweepConfig{Every: 3 * time.Millisecond, Grace: time.Nanosecond},
		observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
			if ev.Op == protocol.OpSweep {
				swept.Add(int64(ev.Items))
			}
		})}
	rts := r.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := r.run(t, ctx, rts)
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name(), Sweeping: true, SweepGrace: time.Nanosecond})
	batches, batched := r.batches()
	t.Logf("history: %v; %d operations in %d batches", res, batched, batches)
	if err != nil {
		t.Fatal(err)
	}
	r.checkAudit(t, h)
	if res.Operations < 2000 {
		t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
	}
	if swept.Load() == 0 {
		t.Fatal("no row was swept: the run did not test sweeping")
	}
	t.Logf("%d rows swept", swept.Load())
}

// TestLinearizableCoalesced runs the workload with many clients per pool
// on the workload's three keys, each backend sending one round trip at a
// time (MaxInFlight 1), so that nearly every operation goes to the server
// in a batch with others, often with operations on its own key; the clients
// retry with the same request id and throw away some answers, so that
// replays meet batches. The history must be linearizable, and batches must
// have formed (else the test did not test coalescing). A second run does
// the same while another connection terminates the pools' server
// processes, killing batches mid-way.
func TestLinearizableCoalesced(t *testing.T) {
	t.Parallel()
	for _, terminate := range []bool{false, true} {
		t.Run(fmt.Sprintf("terminate=%v", terminate), func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			r := lincheckRun{dsn: dsn, app: "lincheck-" + appName(t), pools: 2, clients: 8, ops: 1200, loseAnswers: 0.02,
				backends: new([]*postgres.Backend)}
			rts := r.open(t)
			stop := func() int { return 0 }
			if terminate {
				stop = terminator(t, pgtest.ServerDSN(t), r.app, 75*time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			h := r.run(t, ctx, rts)
			killed := stop()
			res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
			batches, batched := r.batches()
			t.Logf("history: %v; %d operations in %d batches; %d server processes terminated", res, batched, batches, killed)
			if err != nil {
				t.Fatal(err)
			}
			r.checkAudit(t, h)
			if res.Operations < 2000 {
				t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
			}
			if batches < 50 {
				t.Fatalf("only %d batches formed: the run did not test coalescing", batches)
			}
			if terminate && killed == 0 {
				t.Errorf("no connection was terminated")
			}
		})
	}
}

// TestLinearizableUncoalesced runs the workload of
// TestLinearizableCoalesced with coalescing off: every operation is a
// statement of its own, and sixteen clients on the workload's three keys
// keep sending statements that meet a change of their key committed after
// their snapshot (whose outcome is read in the newest committed state,
// leasestore_outcome_fresh). The history must be linearizable.
func TestLinearizableUncoalesced(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	r := lincheckRun{dsn: dsn, app: "lincheck-" + appName(t), pools: 2, clients: 8, ops: 1200, loseAnswers: 0.02,
		noCoalescing: true, backends: new([]*postgres.Backend)}
	rts := r.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := r.run(t, ctx, rts)
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
	t.Logf("history: %v", res)
	if err != nil {
		t.Fatal(err)
	}
	r.checkAudit(t, h)
	if res.Operations < 2000 {
		t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
	}
	if batches, _ := r.batches(); batches != 0 {
		t.Fatalf("%d batches formed with coalescing off", batches)
	}
}

// TestLinearizableWithStuckKey runs the coalesced workload while another
// session keeps locking the row of key k0 (SELECT ... FOR UPDATE, held for
// 100 to 400 ms, then let go for 50 to 150 ms), as a DBA's or a report's
// transaction would. Attempts time out after 150 ms: those on k0 while it
// is locked time out and are retried with the same request id, the batches
// they were sent in run them alone (busy) and go on with the other keys.
// The history must be linearizable, and the stuck key must have held up
// operations (else the fault was not exercised).
func TestLinearizableWithStuckKey(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	r := lincheckRun{dsn: dsn, app: "lincheck-" + appName(t), pools: 2, clients: 6, ops: 1500, loseAnswers: 0.02,
		attemptTimeout: 150 * time.Millisecond, backends: new([]*postgres.Backend)}
	rts := r.open(t)

	var (
		stalls atomic.Int64
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	locker := rawConn(t, dsn)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50*time.Millisecond + rand.N(100*time.Millisecond)):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			tx, err := locker.Begin(ctx)
			if err != nil {
				cancel()
				t.Error(err)
				return
			}
			tag, err := tx.Exec(ctx, `SELECT FROM leasestore_leases WHERE namespace = 'lincheck' AND name = 'k0' FOR UPDATE`)
			if err == nil && tag.RowsAffected() > 0 {
				stalls.Add(1)
				time.Sleep(100*time.Millisecond + rand.N(300*time.Millisecond))
			}
			_ = tx.Rollback(ctx)
			cancel()
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := r.run(t, ctx, rts)
	close(done)
	wg.Wait()

	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
	batches, batched := r.batches()
	t.Logf("history: %v; %d operations in %d batches; k0 locked %d times", res, batched, batches, stalls.Load())
	if err != nil {
		t.Fatal(err)
	}
	r.checkAudit(t, h)
	if res.Operations < 2000 {
		t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
	}
	if stalls.Load() < 5 || batches < 50 {
		t.Fatalf("k0 locked %d times, %d batches: the run did not test a stuck key in batches", stalls.Load(), batches)
	}
}
