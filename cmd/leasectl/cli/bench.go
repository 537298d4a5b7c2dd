package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/cmd/leasectl/rawbench"
	"github.com/leasestore/leasestore/internal/proccpu"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Bench workloads.
const (
	benchAcquireRelease = "acquire-release"
	benchRenew          = "renew"
	benchMixed          = "mixed"
)

// benchJSON is the output of bench: the fields pinned by DESIGN.md, and
// status, namespace and conflicts besides. In a [benchRunsJSON]'s runs,
// status is left out (the whole output's status says it).
type benchJSON struct {
	Status      string  `json:"status,omitempty"` // "ok"
	Backend     string  `json:"backend"`
	Namespace   string  `json:"namespace"`
	Op          string  `json:"op"`
	Concurrency int     `json:"concurrency"`
	Keys        int     `json:"keys"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	Conflicts   int64   `json:"conflicts"` // expected refusals: another worker held the key
	DurationS   float64 `json:"duration_s"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	// ServerCPUUSPerOp and ClientCPUUSPerOp: CPU time per operation of the
	// server processes of the pool (PostgreSQL on this host only) and of
	// leasectl itself, in microseconds; absent when not measured.
	ServerCPUUSPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	ClientCPUUSPerOp float64 `json:"client_cpu_us_per_op,omitempty"`
}

// histogram records latencies in logarithmic buckets 2% wide, so a long
// run keeps constant memory and quantiles are within 2%.
type histogram struct {
	counts [histBuckets]int64
	total  int64
}

const (
	histBase    = 1.02
	histBuckets = 1400 // 1.02^1400 ns is far beyond any deadline
)

var logHistBase = math.Log(histBase)

func (h *histogram) record(d time.Duration) {
	i := 0
	if d > 1 {
		i = int(math.Log(float64(d)) / logHistBase)
	}
	if i >= histBuckets {
		i = histBuckets - 1
	}
	h.counts[i]++
	h.total++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the q-quantile (0 < q <= 1): the geometric middle of the
// bucket holding it. Zero when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(math.Pow(histBase, float64(i)+0.5))
		}
	}
	return time.Duration(math.Pow(histBase, histBuckets))
}

// benchWorker is one goroutine's tally; only that goroutine writes it.
type benchWorker struct {
	hist      histogram
	conflicts int64
}

// Bench subjects: the store through the protocol runtime, and the raw
// baseline (package rawbench) beside it.
const (
	subjectStore = "leasestore"
	subjectRaw   = "raw"
)

// benchSubject is what a bench run drives: acquire and release for the
// acquire-release workload; the runtime, for the others (the store only).
type benchSubject struct {
	name    string    // subjectStore or subjectRaw
	cpu     *cpuMeter // nil when the server's CPU is not measured
	rt      *protocol.Runtime
	acquire func(ctx context.Context, key protocol.Key, owner string, ttl time.Duration) (int64, protocol.Status, error)
	release func(ctx context.Context, key protocol.Key, owner string, token int64) (protocol.Status, error)
}

// storeSubject drives the store through rt.
func storeSubject(rt *protocol.Runtime) *benchSubject {
	return &benchSubject{
		name: subjectStore,
		rt:   rt,
		acquire: func(ctx context.Context, key protocol.Key, owner string, ttl time.Duration) (int64, protocol.Status, error) {
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: owner, TTL: ttl})
			if res.Lease == nil {
				return 0, res.Status, err
			}
			return res.Lease.Token, res.Status, err
		},
		release: func(ctx context.Context, key protocol.Key, owner string, token int64) (protocol.Status, error) {
			res, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: owner, Token: token})
			return res.Status, err
		},
	}
}

// rawSubject drives the raw baseline; its outcomes are mapped to the
// statuses the store would answer.
func rawSubject(r rawbench.Baseline) *benchSubject {
	return &benchSubject{
		name: subjectRaw,
		acquire: func(ctx context.Context, key protocol.Key, owner string, ttl time.Duration) (int64, protocol.Status, error) {
			token, ok, err := r.Acquire(ctx, key.Name, owner, ttl)
			switch {
			case err != nil:
				return 0, protocol.StatusUnavailable, nil
			case !ok:
				return 0, protocol.StatusConflict, nil
			}
			return token, protocol.StatusAcquired, nil
		},
		release: func(ctx context.Context, key protocol.Key, owner string, token int64) (protocol.Status, error) {
			ok, err := r.Release(ctx, key.Name, owner, token)
			switch {
			case err != nil:
				return protocol.StatusUnavailable, nil
			case !ok:
				return protocol.StatusNotFound, nil
			}
			return protocol.StatusReleased, nil
		},
	}
}

// benchRun is one measurement: one subject at one concurrency.
type benchRun struct {
	a         *app
	s         *benchSubject
	op        string
	ns        string
	keys      []string
	ttl       time.Duration
	interrupt context.Context // cancelled by the user: stop, and do not count cancelled ops as errors

	counting atomic.Bool  // false during the warm-up
	ops      atomic.Int64 // protocol operations finished
	errors   atomic.Int64 // operations whose outcome the workload does not expect
	tokens   []int64      // renew: the token of each key, held by owner "bench"

	// refused is closed when a store refused an operation's credentials
	// or their permission (a served store's bearer token, HTTP 401/403;
	// the DSN's role, user, password or grants): the run stops and bench fails with refusal (exit
	// 7), as every command does; a bad token is neither load nor an outage.
	refused    chan struct{}
	refuseOnce sync.Once
	refusal    error
}

// refuse records the first refusal of the bearer token and stops the run.
func (b *benchRun) refuse(err error) {
	b.refuseOnce.Do(func() {
		b.refusal = err
		close(b.refused)
	})
}

// timed runs one protocol operation, records its latency and counts it
// (after the warm-up). expected lists the statuses that are not errors.
// An operation whose bearer token the served store refused is not counted:
// it stops the run (see benchRun.refused).
func (b *benchRun) timed(w *benchWorker, run func() (protocol.Status, error), expected ...protocol.Status) protocol.Status {
	start := time.Now()
	st, err := run()
	if refused := authFailure(err); refused != nil {
		b.refuse(refused)
		return st
	}
	if !b.counting.Load() {
		return st
	}
	w.hist.record(time.Since(start))
	b.ops.Add(1)
	for _, e := range expected {
		if st == e {
			return st
		}
	}
	if b.interrupt.Err() == nil {
		b.errors.Add(1)
		b.a.log.Debug("bench: unexpected outcome", "subject", b.s.name, "status", st)
	}
	return st
}

// cycle acquires a key and, when that works, releases it.
func (b *benchRun) cycle(ctx context.Context, w *benchWorker, key protocol.Key, owner string) {
	var token int64
	st := b.timed(w, func() (protocol.Status, error) {
		var (
			st  protocol.Status
			err error
		)
		token, st, err = b.s.acquire(ctx, key, owner, b.ttl)
		return st, err
	}, protocol.StatusAcquired, protocol.StatusConflict)
	switch st {
	case protocol.StatusConflict:
		if b.counting.Load() {
			w.conflicts++
		}
	case protocol.StatusAcquired:
		b.timed(w, func() (protocol.Status, error) {
			// Released even when the run is being interrupted, so a bench
			// leaves no lease behind; hence not ctx.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.a.timeout)
			defer cancel()
			return b.s.release(rctx, key, owner, token)
		}, protocol.StatusReleased)
	}
}

// work is one worker's loop until stop is closed.
func (b *benchRun) work(ctx context.Context, id int, stop <-chan struct{}, w *benchWorker) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	owner := fmt.Sprintf("bench-%d", id)
	for {
		select {
		case <-stop:
			return
		default:
		}
		k := rng.IntN(len(b.keys))
		key := protocol.Key{Namespace: b.ns, Name: b.keys[k]}
		switch b.op {
		case benchAcquireRelease:
			b.cycle(ctx, w, key, owner)
		case benchRenew:
			b.timed(w, func() (protocol.Status, error) {
				res, err := b.s.rt.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "bench", Token: b.tokens[k], TTL: b.ttl})
				return res.Status, err
			}, protocol.StatusRenewed)
		case benchMixed:
			switch n := rng.IntN(10); {
			case n < 6:
				b.timed(w, func() (protocol.Status, error) {
					res, err := b.s.rt.Get(ctx, protocol.GetRequest{Key: key})
					return res.Status, err
				}, protocol.StatusFound, protocol.StatusNotFound)
			case n < 7:
				b.timed(w, func() (protocol.Status, error) {
					res, err := b.s.rt.List(ctx, protocol.ListRequest{Namespace: b.ns, Limit: 10})
					return res.Status, err
				}, protocol.StatusFound)
			default:
				b.cycle(ctx, w, key, owner)
			}
		}
	}
}

// benchFlags are bench's validated options.
type benchFlags struct {
	levels       []int // concurrency of each measurement, in order
	keys         int
	duration     time.Duration
	warmUp       time.Duration
	ttl          time.Duration
	op, ns       string
	compareRaw   bool
	noCoalescing bool
	maxInFlight  int
}

func (a *app) benchCommand() *cobra.Command {
	var (
		f           benchFlags
		concurrency []int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Generate load against the store and report throughput and latency",
		Long: `Run --concurrency workers against the store for --duration, on --keys keys
of a namespace of its own (bench-XXXXXXXX unless -n is given), and report
operations per second and latency quantiles. Progress goes to stderr every
second: on a terminal one line rewritten in place, elsewhere a log line.

Workloads (--op):
  acquire-release  acquire a random key and, when acquired, release it
  renew            renew leases taken on every key before the clock starts
  mixed            60% get, 10% list, 30% acquire-release cycles

ops counts protocol operations: an acquire-release cycle is two, an acquire
that meets a conflict is one. A conflict (another worker holds the key) is an
expected outcome, counted apart; errors counts operations whose outcome the
workload does not expect: timeout, unavailable, a release or renew that did
not take effect, and so on. Operations cut short by an interrupt are not
errors. bench exits 0 when it ran to its end, whatever the error count,
except that a store refusing the credentials of any operation or their
permission (a served store's bearer token, HTTP 401 or 403; the DSN's
role, user, password or grants) stops bench at once with exit 7, as every
command, naming the refusal.

A list of concurrencies (-c 1,8,32) runs one measurement per value, in
order. --compare-raw measures, beside each, the raw baseline: the least a
lease store must do, issued straight through the driver in tables of its
own (PostgreSQL: a scratch schema leasestore_raw_XXXXXXXX with a conditional
upsert plus audit insert for acquire, a delete plus audit insert for release,
two plain indexes on its audit table; SQLite: a scratch file beside the
store, one database/sql transaction per operation with the same settings),
dropped at the end. The raw and store runs alternate, so that both see the
same machine; ratios (store / raw ops per second) are only meaningful within
one run. With a list or --compare-raw the output is a table, or with -o json
one object, {"status","backend","namespace","op","keys","runs":[...]}, whose
runs hold one object per measurement, in the order they ran, with the
fields of a single run's output but status (and subject "leasestore" or
"raw", and ratio_to_raw on the store's). Each measurement starts with an
uncounted warm-up (--warm-up).

--no-coalescing sends every operation of the store alone; --max-in-flight
sets PostgreSQL's cap of coalesced round trips. Where one cannot apply it
is refused (exit 2): --max-in-flight on SQLite, on etcd, beside
--no-coalescing or behind a transaction pooler; either against a served
store (http://), whose coalescing is the server's.

Every state change is written to the audit trail, which is append-only: point
bench at a scratch store.`,
		Example: `  leasectl bench --dsn sqlite:/tmp/bench.db --concurrency 8 --duration 10s --keys 64
  leasectl bench --dsn postgres://leasestore@db/bench --op mixed -o json
  leasectl bench --dsn postgres://leasestore@db/bench -c 1,8,32 --compare-raw --keys 100000 --duration 10s`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch f.op {
			case benchAcquireRelease, benchRenew, benchMixed:
			default:
				return usageError("--op: %q is not one of %s, %s, %s", f.op, benchAcquireRelease, benchRenew, benchMixed)
			}
			if len(concurrency) == 0 {
				return usageError("--concurrency: give at least one value")
			}
			for _, c := range concurrency {
				if c < 1 || c > 1024 {
					return usageError("--concurrency: %d is outside [1, 1024]", c)
				}
			}
			f.levels = concurrency
			if f.keys < 1 || f.keys > 1_000_000 {
				return usageError("--keys: %d is outside [1, 1000000]", f.keys)
			}
			if !cmd.Flags().Changed("warm-up") {
				f.warmUp = min(f.duration/5, 2*time.Second)
			}
			if f.compareRaw && f.op != benchAcquireRelease {
				return usageError("--compare-raw: the raw baseline runs the %s workload only, not %s", benchAcquireRelease, f.op)
			}
			if f.ns == "" {
				f.ns = "bench-" + protocol.RandomRequestID()[:8]
			}
			if err := textfield.Validate("namespace", f.ns, protocol.MaxNamespaceLen); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			t, err := a.target()
			if err != nil {
				return err
			}
			// One pooled connection per worker, so that the figures measure
			// the database rather than a queue for connections.
			if f.maxInFlight < 0 {
				return usageError("--max-in-flight: must not be negative, got %d", f.maxInFlight)
			}
			if err := benchCoalescingApplies(t, f); err != nil {
				return err
			}
			app := "leasectl-bench-" + protocol.RandomRequestID()[:8]
			s, err := a.openTarget(cmd.Context(), t, openOptions{maxConns: int32(slices.Max(f.levels)),
				noCoalescing: f.noCoalescing, maxInFlight: f.maxInFlight, appName: app})
			if err != nil {
				return err
			}
			defer s.close(a)
			if err := coalescingOpened(s, f); err != nil {
				return err
			}
			if t.dialect == migrations.Postgres && !dsnHasParam(t.raw, "application_name") {
				s.cpu = &cpuMeter{dsn: t.raw, app: app}
			}
			var raw rawbench.Baseline
			if f.compareRaw {
				if raw, err = a.openRaw(cmd.Context(), t, int32(slices.Max(f.levels))); err != nil {
					return err
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
					defer cancel()
					if err := raw.Close(ctx); err != nil {
						a.log.Warn("bench: removing the raw baseline's tables", "err", a.red.redact(err.Error()))
					}
				}()
			}
			rows, err := a.runBenches(cmd.Context(), s, raw, f)
			if err != nil {
				return err
			}
			if len(rows) == 1 {
				a.printBench(rows[0])
				return nil
			}
			a.printBenchTable(rows, f)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVarP(&concurrency, "concurrency", "c", []int{8}, "number of concurrent workers; a list (1,8,32) runs one measurement each")
	fl.VarP(newDurationFlag(&f.duration, 10*time.Second, positive, 0), "duration", "d", "how long each measurement runs")
	fl.Var(newDurationFlag(&f.warmUp, 0, 0, 0), "warm-up", "uncounted run before each measurement (default: a fifth of --duration, at most 2s)")
	intVar(fl, &f.keys, "keys", 16, "number of distinct keys")
	fl.StringVar(&f.op, "op", benchAcquireRelease, "workload: acquire-release, renew or mixed")
	_ = cmd.RegisterFlagCompletionFunc("op", cobra.FixedCompletions(
		[]string{benchAcquireRelease, benchRenew, benchMixed}, cobra.ShellCompDirectiveNoFileComp))
	fl.Var(newDurationFlag(&f.ttl, DefaultTTL, protocol.MinTTL, protocol.MaxTTL), "ttl", "lease duration used by the workload")
	fl.StringVarP(&f.ns, "namespace", "n", "", "namespace to work in (default: bench- and 8 random hex digits)")
	fl.BoolVar(&f.compareRaw, "compare-raw", false, "measure the raw baseline beside the store, in the same run")
	fl.BoolVar(&f.noCoalescing, "no-coalescing", false, "send every operation of the store on its own (one statement or transaction each), for comparison")
	intVar(fl, &f.maxInFlight, "max-in-flight", 0, "PostgreSQL: state-changing round trips in flight before operations are coalesced (default: the backend's)")
	return cmd
}

// openRaw opens the raw baseline for t.
func (a *app) openRaw(ctx context.Context, t target, conns int32) (rawbench.Baseline, error) {
	ctx, cancel := a.opContext(ctx)
	defer cancel()
	var (
		r   rawbench.Baseline
		err error
	)
	switch t.dialect {
	case migrations.Postgres:
		var p *rawbench.Postgres
		if p, err = rawbench.OpenPostgres(ctx, t.raw, conns); err == nil {
			a.log.Info("bench: raw baseline", "schema", p.Schema())
			r = p
		}
	case migrations.SQLite:
		var s *rawbench.SQLite
		if s, err = rawbench.OpenSQLite(ctx, filepath.Dir(t.path)); err == nil {
			a.log.Info("bench: raw baseline", "file", s.Path())
			r = s
		}
	default:
		return nil, usageError("--compare-raw: no raw baseline for this store")
	}
	if err != nil {
		return nil, failWith(errors.New(a.red.redact(err.Error())))
	}
	return r, nil
}

// benchCoalescingApplies refuses (usage) bench's coalescing flags where
// they cannot apply, which would otherwise go silently unheeded:
// --max-in-flight is PostgreSQL's cap of coalesced round trips, which
// SQLite (one transaction at a time), etcd (no coalescing), --no-coalescing
// and a transaction pooler (pooler=transaction: no coalescing) have none
// of; a served store's coalescing is the server's, out of reach of both
// flags. A pooler found only when the store opens is coalescingOpened's.
func benchCoalescingApplies(t target, f benchFlags) error {
	capped := f.maxInFlight > 0
	switch {
	case t.remote && (capped || f.noCoalescing):
		flag := "--max-in-flight"
		if !capped {
			flag = "--no-coalescing"
		}
		return usageError("%s: a served store coalesces as the server (leasectl serve) opened its store, which bench cannot change: "+
			"run bench with the database's DSN (the DSN leasectl serve was given), or leave %s out", flag, flag)
	case !capped:
		return nil
	case t.etcd != nil:
		return usageError("--max-in-flight: the etcd backend does not coalesce operations (each is a transaction of its own), " +
			"so there is no cap to set: leave it out")
	case t.dialect == migrations.SQLite:
		return usageError("--max-in-flight: SQLite writes one transaction at a time (the writes that arrive meanwhile share " +
			"the next), so there is no cap of round trips to set: leave it out (--no-coalescing turns the sharing off)")
	case f.noCoalescing:
		return usageError("--max-in-flight caps the round trips of coalescing, which --no-coalescing turns off: give one of them")
	case t.dialect == migrations.Postgres:
		if c, err := pgx.ParseConfig(t.raw); err == nil {
			if mode, err := postgres.DSNPooler(c); err == nil && mode == postgres.PoolerTransaction {
				return usageError("--max-in-flight: behind a transaction pooler (the DSN's pooler=transaction) the backend " +
					"does not coalesce, so there is no cap to set: leave it out, or bench the server directly")
			}
		}
	}
	return nil
}

// coalescingOpened refuses --max-in-flight (usage) once the store s is
// open when its backend does not coalesce: PostgreSQL found a transaction
// pooler in front (PgBouncer in transaction or statement mode).
func coalescingOpened(s *store, f benchFlags) error {
	if f.maxInFlight == 0 || f.noCoalescing {
		return nil
	}
	b, ok := s.rt.Backend().(*postgres.Backend)
	if !ok || b.Coalescing().Limit > 0 {
		return nil
	}
	return usageError("--max-in-flight: a transaction pooler is in front of the server (found at open: PgBouncer in " +
		"transaction or statement mode), behind which the backend does not coalesce, so there is no cap to set: " +
		"leave it out, or bench the server directly")
}

// benchRow is one measurement's result.
type benchRow struct {
	benchJSON
	Subject    string  `json:"subject,omitempty"`
	RatioToRaw float64 `json:"ratio_to_raw,omitempty"`
}

// benchRunsJSON is the one JSON object bench prints for several
// measurements (a list of concurrencies, or --compare-raw): what they
// share, and runs, a row per measurement in the order they ran.
type benchRunsJSON struct {
	Status    string     `json:"status"` // "ok"
	Backend   string     `json:"backend"`
	Namespace string     `json:"namespace"`
	Op        string     `json:"op"`
	Keys      int        `json:"keys"`
	Runs      []benchRow `json:"runs"`
}

// runBenches runs one measurement per concurrency, the raw baseline's
// first when there is one.
func (a *app) runBenches(ctx context.Context, s *store, raw rawbench.Baseline, f benchFlags) ([]benchRow, error) {
	keys := make([]string, f.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%06d", i)
	}
	store := storeSubject(s.rt)
	store.cpu = s.cpu
	var rows []benchRow
	for _, c := range f.levels {
		var rawRow *benchRow
		if raw != nil {
			rs := rawSubject(raw)
			if p, ok := raw.(*rawbench.Postgres); ok && s.cpu != nil {
				rs.cpu = &cpuMeter{dsn: s.cpu.dsn, app: p.AppName()}
			}
			out, conflicts, err := a.runBench(ctx, rs, s.backend, f, keys, c)
			if err != nil {
				return nil, err
			}
			out.Namespace, out.Conflicts = "", conflicts
			rows = append(rows, benchRow{benchJSON: out, Subject: subjectRaw})
			rawRow = &rows[len(rows)-1]
		}
		if ctx.Err() != nil {
			break
		}
		out, conflicts, err := a.runBench(ctx, store, s.backend, f, keys, c)
		if err != nil {
			return nil, err
		}
		out.Namespace, out.Conflicts = f.ns, conflicts
		row := benchRow{benchJSON: out}
		if raw != nil || len(f.levels) > 1 {
			row.Subject = subjectStore
		}
		if rawRow != nil && rawRow.OpsPerSec > 0 {
			row.RatioToRaw = round3(out.OpsPerSec / rawRow.OpsPerSec)
		}
		rows = append(rows, row)
		if ctx.Err() != nil {
			break
		}
	}
	return rows, nil
}

// runBench runs the workload on one subject at one concurrency.
func (a *app) runBench(ctx context.Context, subj *benchSubject, backend string, f benchFlags, keys []string,
	concurrency int) (out benchJSON, conflicts int64, err error) {
	b := &benchRun{a: a, s: subj, op: f.op, ns: f.ns, keys: keys, ttl: f.ttl, interrupt: ctx, refused: make(chan struct{})}
	if f.op == benchRenew {
		if err := b.takeAll(ctx); err != nil {
			return benchJSON{}, 0, err
		}
		defer b.releaseAll()
	}
	a.log.Info("bench: starting", "subject", subj.name, "backend", backend, "op", f.op, "concurrency", concurrency,
		"keys", len(keys), "duration", f.duration, "namespace", f.ns)

	stop := make(chan struct{})
	workers := make([]*benchWorker, concurrency)
	var wg sync.WaitGroup
	b.counting.Store(f.warmUp == 0)
	for i := range workers {
		workers[i] = &benchWorker{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(ctx, i, stop, workers[i])
		}()
	}
	if f.warmUp > 0 {
		select {
		case <-time.After(f.warmUp):
		case <-ctx.Done():
		case <-b.refused:
		}
		b.counting.Store(true)
	}
	cpu0, self0 := subj.cpu.sample(ctx), proccpu.Self()
	start := time.Now()
	timer := time.NewTimer(f.duration)
	ticker := time.NewTicker(time.Second)
	progress := a.newProgressLine(unwrapWriter(a.stderr))
	if !a.log.Enabled(ctx, slog.LevelInfo) {
		progress = nil // --log-level warn or error asks for quiet
	}
	var lastOps int64
	lastTick := start
wait:
	for {
		select {
		case <-timer.C:
			break wait
		case <-ctx.Done():
			a.log.Warn("bench: interrupted; reporting what ran")
			break wait
		case <-b.refused:
			break wait
		case now := <-ticker.C:
			ops := b.ops.Load()
			rate := float64(ops-lastOps) / now.Sub(lastTick).Seconds()
			lastOps, lastTick = ops, now
			line := fmt.Sprintf("bench: %s, %d callers: %v of %v, %d ops, %.0f ops/s, %d errors", subj.name, concurrency,
				now.Sub(start).Round(time.Second), f.duration, ops, math.Round(rate), b.errors.Load())
			if !progress.show(line) {
				a.log.Info("bench: progress", "subject", subj.name, "concurrency", concurrency,
					"elapsed", now.Sub(start).Round(time.Second), "ops", ops,
					"ops_per_sec", math.Round(rate), "errors", b.errors.Load())
			}
		}
	}
	progress.done()
	ticker.Stop()
	timer.Stop()
	elapsed := time.Since(start)
	ops, errs := b.ops.Load(), b.errors.Load()
	serverCPU, clientCPU := subj.cpu.sample(context.WithoutCancel(ctx)).since(cpu0), proccpu.Self()-self0
	close(stop)
	wg.Wait()
	if b.refusal != nil {
		return benchJSON{}, 0, b.refusal
	}

	var total histogram
	for _, w := range workers {
		total.merge(&w.hist)
		conflicts += w.conflicts
	}
	out = benchJSON{
		Backend: backend, Op: f.op, Concurrency: concurrency, Keys: len(keys),
		Ops: ops, Errors: errs, DurationS: round3(elapsed.Seconds()),
		P50MS: round3(float64(total.quantile(0.50)) / 1e6), P99MS: round3(float64(total.quantile(0.99)) / 1e6),
	}
	if elapsed > 0 {
		out.OpsPerSec = round3(float64(out.Ops) / elapsed.Seconds())
	}
	if ops > 0 {
		out.ClientCPUUSPerOp = round3(float64(clientCPU.Microseconds()) / float64(ops))
		if serverCPU >= 0 {
			out.ServerCPUUSPerOp = round3(float64(serverCPU.Microseconds()) / float64(ops))
		}
	}
	a.log.Info("bench: done", "subject", subj.name, "concurrency", concurrency, "ops", out.Ops, "errors", out.Errors,
		"conflicts", conflicts)
	return out, conflicts, nil
}

// takeAll acquires every key for the renew workload.
func (b *benchRun) takeAll(ctx context.Context) error {
	b.tokens = make([]int64, len(b.keys))
	for i, name := range b.keys {
		res, err := b.s.rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: b.ns, Name: name}, Owner: "bench", TTL: b.ttl})
		if err != nil {
			return failWith(fmt.Errorf("bench: take %s before the run: %w", name, err))
		}
		b.tokens[i] = res.Lease.Token
	}
	return nil
}

// releaseAll releases the renew workload's leases, best effort.
func (b *benchRun) releaseAll() {
	for i, name := range b.keys {
		ctx, cancel := context.WithTimeout(context.Background(), b.a.timeout)
		_, _ = b.s.rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: b.ns, Name: name}, Owner: "bench", Token: b.tokens[i]})
		cancel()
	}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func (a *app) printBench(row benchRow) {
	out := row.benchJSON
	// One measurement keeps DESIGN's shape; the CPU figures go with tables.
	out.ServerCPUUSPerOp, out.ClientCPUUSPerOp = 0, 0
	if a.output == "json" {
		out.Status = StatusOK
		a.printJSON(out)
		return
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\t%s\n", out.Backend)
	fmt.Fprintf(tw, "op\t%s\n", out.Op)
	fmt.Fprintf(tw, "concurrency\t%d\n", out.Concurrency)
	fmt.Fprintf(tw, "keys\t%d (namespace %s)\n", out.Keys, out.Namespace)
	fmt.Fprintf(tw, "duration\t%.3fs\n", out.DurationS)
	fmt.Fprintf(tw, "ops\t%d (protocol operations; an acquire-release cycle is two)\n", out.Ops)
	fmt.Fprintf(tw, "ops/s\t%.1f\n", out.OpsPerSec)
	fmt.Fprintf(tw, "p50\t%.3fms\n", out.P50MS)
	fmt.Fprintf(tw, "p99\t%.3fms\n", out.P99MS)
	fmt.Fprintf(tw, "errors\t%d\n", out.Errors)
	fmt.Fprintf(tw, "conflicts\t%d (expected: another worker held the key; not errors)\n", out.Conflicts)
	_ = tw.Flush()
	a.printText(sb.String())
}

// printBenchTable prints several measurements: a table, or one JSON
// object holding a row for each (benchRunsJSON).
func (a *app) printBenchTable(rows []benchRow, f benchFlags) {
	if a.output == "json" {
		a.printJSON(benchRunsJSON{Status: StatusOK, Backend: rows[0].Backend, Namespace: f.ns, Op: f.op,
			Keys: f.keys, Runs: rows})
		return
	}
	var sb strings.Builder
	coalescing := "coalescing on"
	if f.noCoalescing {
		coalescing = "coalescing off"
	}
	fmt.Fprintf(&sb, "backend %s (%s), op %s, %d keys (namespace %s), %s per measurement after a %s warm-up\n",
		rows[0].Backend, coalescing, f.op, f.keys, f.ns, f.duration, f.warmUp)
	if f.compareRaw {
		sb.WriteString("raw: the baseline statements in scratch tables, measured in this run; ratio = leasestore ops/s / raw ops/s\n")
	}
	sb.WriteString("\n")
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tsubject\tops/s\tp50 ms\tp99 ms\tserver CPU µs/op\tleasectl CPU µs/op\terrors\tconflicts\tratio\t")
	for _, r := range rows {
		ratio := ""
		if r.RatioToRaw > 0 {
			ratio = fmt.Sprintf("%.2f×", r.RatioToRaw)
		}
		subject := r.Subject
		if subject == "" {
			subject = subjectStore
		}
		srv := "-"
		if r.ServerCPUUSPerOp > 0 {
			srv = fmt.Sprintf("%.0f", r.ServerCPUUSPerOp)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.3f\t%.3f\t%s\t%.0f\t%d\t%d\t%s\t\n", r.Concurrency, subject, r.OpsPerSec, r.P50MS,
			r.P99MS, srv, r.ClientCPUUSPerOp, r.Errors, r.Conflicts, ratio)
	}
	_ = tw.Flush()
	a.printText(sb.String())
}
