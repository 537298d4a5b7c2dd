package cli

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// Bench workloads.
const (
	benchAcquireRelease = "acquire-release"
	benchRenew          = "renew"
	benchMixed          = "mixed"
)

// benchJSON is the output of bench: the fields pinned by DESIGN.md, and
// status, namespace and conflicts besides.
type benchJSON struct {
	Status      string  `json:"status"` // "ok"
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

// benchRun is one bench invocation.
type benchRun struct {
	a         *app
	rt        *protocol.Runtime
	op        string
	ns        string
	keys      []string
	ttl       time.Duration
	interrupt context.Context // cancelled by the user: stop, and do not count cancelled ops as errors

	ops    atomic.Int64 // protocol operations finished
	errors atomic.Int64 // operations whose outcome the workload does not expect
	tokens []int64      // renew: the token of each key, held by owner "bench"
}

// timed runs one protocol operation, records its latency and counts it.
// expected lists the statuses that are not errors.
func (b *benchRun) timed(w *benchWorker, run func() protocol.Status, expected ...protocol.Status) protocol.Status {
	start := time.Now()
	st := run()
	w.hist.record(time.Since(start))
	b.ops.Add(1)
	for _, e := range expected {
		if st == e {
			return st
		}
	}
	if b.interrupt.Err() == nil {
		b.errors.Add(1)
		b.a.log.Debug("bench: unexpected outcome", "status", st)
	}
	return st
}

// cycle acquires a key and, when that works, releases it.
func (b *benchRun) cycle(ctx context.Context, w *benchWorker, key protocol.Key, owner string) {
	var lease *protocol.Lease
	st := b.timed(w, func() protocol.Status {
		res, _ := b.rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: owner, TTL: b.ttl})
		lease = res.Lease
		return res.Status
	}, protocol.StatusAcquired, protocol.StatusConflict)
	switch {
	case st == protocol.StatusConflict:
		w.conflicts++
	case st == protocol.StatusAcquired && lease != nil:
		b.timed(w, func() protocol.Status {
			// Released even when the run is being interrupted, so a bench
			// leaves no lease behind; hence not ctx.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.a.timeout)
			defer cancel()
			res, _ := b.rt.Release(rctx, protocol.ReleaseRequest{Key: key, Owner: owner, Token: lease.Token})
			return res.Status
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
			b.timed(w, func() protocol.Status {
				res, _ := b.rt.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "bench", Token: b.tokens[k], TTL: b.ttl})
				return res.Status
			}, protocol.StatusRenewed)
		case benchMixed:
			switch n := rng.IntN(10); {
			case n < 6:
				b.timed(w, func() protocol.Status {
					res, _ := b.rt.Get(ctx, protocol.GetRequest{Key: key})
					return res.Status
				}, protocol.StatusFound, protocol.StatusNotFound)
			case n < 7:
				b.timed(w, func() protocol.Status {
					res, _ := b.rt.List(ctx, protocol.ListRequest{Namespace: b.ns, Limit: 10})
					return res.Status
				}, protocol.StatusFound)
			default:
				b.cycle(ctx, w, key, owner)
			}
		}
	}
}

func (a *app) benchCommand() *cobra.Command {
	var (
		concurrency, keys int
		duration, ttl     time.Duration
		op, ns            string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Generate load against the store and report throughput and latency",
		Long: `Run --concurrency workers against the store for --duration, on --keys keys
of a namespace of its own (bench-XXXXXXXX unless -n is given), and report
operations per second and latency quantiles. A progress line goes to stderr
every second.

Workloads (--op):
  acquire-release  acquire a random key and, when acquired, release it
  renew            renew leases taken on every key before the clock starts
  mixed            60% get, 10% list, 30% acquire-release cycles

ops counts protocol operations: an acquire-release cycle is two, an acquire
that meets a conflict is one. A conflict (another worker holds the key) is an
expected outcome, counted apart; errors counts operations whose outcome the
workload does not expect: timeout, unavailable, a release or renew that did
not take effect, and so on. Operations cut short by an interrupt are not
errors. bench exits 0 when it ran to its end, whatever the error count.

Every state change is written to the audit trail, which is append-only: point
bench at a scratch store.`,
		Example: `  leasectl bench --dsn sqlite:/tmp/bench.db --concurrency 8 --duration 10s --keys 64
  leasectl bench --dsn postgres://leasestore@db/bench --op mixed -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch op {
			case benchAcquireRelease, benchRenew, benchMixed:
			default:
				return usageError("--op: %q is not one of %s, %s, %s", op, benchAcquireRelease, benchRenew, benchMixed)
			}
			if concurrency < 1 || concurrency > 1024 {
				return usageError("--concurrency: %d is outside [1, 1024]", concurrency)
			}
			if keys < 1 || keys > 1_000_000 {
				return usageError("--keys: %d is outside [1, 1000000]", keys)
			}
			if duration <= 0 {
				return usageError("--duration: must be positive, got %v", duration)
			}
			if ns == "" {
				ns = "bench-" + protocol.RandomRequestID()[:8]
			}
			if err := protocol.ValidateText("namespace", ns, protocol.MaxNamespaceLen); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			t, err := parseDSN(a.dsn())
			if err != nil {
				return err
			}
			// One pooled connection per worker, so that the figures measure
			// the database rather than a queue for connections.
			s, err := a.openTarget(cmd.Context(), t, openOptions{maxConns: int32(concurrency)})
			if err != nil {
				return err
			}
			defer s.close(a)
			out, conflicts, err := a.runBench(cmd.Context(), s, op, ns, concurrency, keys, duration, ttl)
			if err != nil {
				return err
			}
			a.printBench(out, ns, conflicts)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&concurrency, "concurrency", "c", 8, "number of concurrent workers")
	f.VarP(newDurationFlag(&duration, 10*time.Second), "duration", "d", "how long to run")
	f.IntVar(&keys, "keys", 16, "number of distinct keys")
	f.StringVar(&op, "op", benchAcquireRelease, "workload: acquire-release, renew or mixed")
	_ = cmd.RegisterFlagCompletionFunc("op", cobra.FixedCompletions(
		[]string{benchAcquireRelease, benchRenew, benchMixed}, cobra.ShellCompDirectiveNoFileComp))
	f.Var(newDurationFlag(&ttl, DefaultTTL), "ttl", "lease duration used by the workload")
	f.StringVarP(&ns, "namespace", "n", "", "namespace to work in (default: bench- and 8 random hex digits)")
	return cmd
}

// runBench runs the workload and returns the result.
func (a *app) runBench(ctx context.Context, s *store, op, ns string, concurrency, nkeys int,
	duration, ttl time.Duration) (out benchJSON, conflicts int64, err error) {
	b := &benchRun{a: a, rt: s.rt, op: op, ns: ns, ttl: ttl, interrupt: ctx}
	for i := range nkeys {
		b.keys = append(b.keys, fmt.Sprintf("key-%06d", i))
	}
	if op == benchRenew {
		if err := b.takeAll(ctx); err != nil {
			return benchJSON{}, 0, err
		}
		defer b.releaseAll()
	}
	a.log.Info("bench: starting", "backend", s.backend, "op", op, "concurrency", concurrency, "keys", nkeys,
		"duration", duration, "namespace", ns)

	stop := make(chan struct{})
	workers := make([]*benchWorker, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		workers[i] = &benchWorker{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(ctx, i, stop, workers[i])
		}()
	}
	timer := time.NewTimer(duration)
	ticker := time.NewTicker(time.Second)
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
		case now := <-ticker.C:
			ops := b.ops.Load()
			rate := float64(ops-lastOps) / now.Sub(lastTick).Seconds()
			lastOps, lastTick = ops, now
			a.log.Info("bench: progress", "elapsed", now.Sub(start).Round(time.Second), "ops", ops,
				"ops_per_sec", math.Round(rate), "errors", b.errors.Load())
		}
	}
	ticker.Stop()
	timer.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	var total histogram
	for _, w := range workers {
		total.merge(&w.hist)
		conflicts += w.conflicts
	}
	out = benchJSON{
		Backend: s.backend, Op: op, Concurrency: concurrency, Keys: nkeys,
		Ops: b.ops.Load(), Errors: b.errors.Load(), DurationS: round3(elapsed.Seconds()),
		P50MS: round3(float64(total.quantile(0.50)) / 1e6), P99MS: round3(float64(total.quantile(0.99)) / 1e6),
	}
	if elapsed > 0 {
		out.OpsPerSec = round3(float64(out.Ops) / elapsed.Seconds())
	}
	a.log.Info("bench: done", "ops", out.Ops, "errors", out.Errors, "conflicts", conflicts)
	return out, conflicts, nil
}

// takeAll acquires every key for the renew workload.
func (b *benchRun) takeAll(ctx context.Context) error {
	b.tokens = make([]int64, len(b.keys))
	for i, name := range b.keys {
		res, err := b.rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: b.ns, Name: name}, Owner: "bench", TTL: b.ttl})
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
		_, _ = b.rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: b.ns, Name: name}, Owner: "bench", Token: b.tokens[i]})
		cancel()
	}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func (a *app) printBench(out benchJSON, ns string, conflicts int64) {
	if a.output == "json" {
		out.Status, out.Namespace, out.Conflicts = StatusOK, ns, conflicts
		a.printJSON(out)
		return
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\t%s\n", out.Backend)
	fmt.Fprintf(tw, "op\t%s\n", out.Op)
	fmt.Fprintf(tw, "concurrency\t%d\n", out.Concurrency)
	fmt.Fprintf(tw, "keys\t%d (namespace %s)\n", out.Keys, ns)
	fmt.Fprintf(tw, "duration\t%.3fs\n", out.DurationS)
	fmt.Fprintf(tw, "ops\t%d (protocol operations; an acquire-release cycle is two)\n", out.Ops)
	fmt.Fprintf(tw, "ops/s\t%.1f\n", out.OpsPerSec)
	fmt.Fprintf(tw, "p50\t%.3fms\n", out.P50MS)
	fmt.Fprintf(tw, "p99\t%.3fms\n", out.P99MS)
	fmt.Fprintf(tw, "errors\t%d\n", out.Errors)
	fmt.Fprintf(tw, "conflicts\t%d (expected: another worker held the key; not errors)\n", conflicts)
	_ = tw.Flush()
	a.printText(sb.String())
}
