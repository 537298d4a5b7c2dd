package promobserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRuntime returns a runtime over a fresh in-memory store with a fixed
// clock, observed by a new Observer on a new pedantic registry (which also
// checks that Describe and Collect agree).
func newRuntime(t *testing.T) (*protocol.Runtime, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	obs, err := New(reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rt := protocol.New(memstore.New(&memstore.Config{Now: func() time.Time { return now }}),
		&protocol.Config{Observer: obs})
	return rt, reg
}

func TestCountsOperationsThroughRuntime(t *testing.T) {
	rt, reg := newRuntime(t)
	ctx := context.Background()
	key := protocol.Key{Namespace: "ns", Name: "job"}

	acq := protocol.AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute, RequestID: "acq-1"}
	res, err := rt.Acquire(ctx, acq)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	token := res.Lease.Token
	if res, err := rt.Acquire(ctx, acq); err != nil || !res.Replayed {
		t.Fatalf("retried Acquire = %+v, %v; want a replay", res, err)
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w2", TTL: time.Minute}); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("competing Acquire = %v, want conflict", err)
	}
	if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "w1", Token: token, TTL: time.Minute}); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: key}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if _, err := rt.List(ctx, protocol.ListRequest{Namespace: "ns"}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "w1", Token: token}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: key}); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("Get after release = %v, want not_found", err)
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "", TTL: time.Minute}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("Acquire without owner = %v, want invalid", err)
	}
	if err := rt.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: key}); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("Get after Close = %v, want closed", err)
	}

	const want = `
# HELP leasestore_operations_total Lease store operations by operation, status, backend and whether the outcome was a replay of an earlier request.
# TYPE leasestore_operations_total counter
leasestore_operations_total{backend="memory",op="acquire",replayed="false",status="acquired"} 1
leasestore_operations_total{backend="memory",op="acquire",replayed="true",status="acquired"} 1
leasestore_operations_total{backend="memory",op="acquire",replayed="false",status="conflict"} 1
leasestore_operations_total{backend="memory",op="acquire",replayed="false",status="invalid"} 1
leasestore_operations_total{backend="memory",op="renew",replayed="false",status="renewed"} 1
leasestore_operations_total{backend="memory",op="get",replayed="false",status="found"} 1
leasestore_operations_total{backend="memory",op="get",replayed="false",status="not_found"} 1
leasestore_operations_total{backend="memory",op="get",replayed="false",status="closed"} 1
leasestore_operations_total{backend="memory",op="list",replayed="false",status="found"} 1
leasestore_operations_total{backend="memory",op="release",replayed="false",status="released"} 1
leasestore_operations_total{backend="memory",op="health",replayed="false",status="ok"} 1
leasestore_operations_total{backend="memory",op="close",replayed="false",status="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), OperationsTotalName); err != nil {
		t.Error(err)
	}

	wantCounts := map[string]uint64{"acquire": 4, "renew": 1, "get": 3, "list": 1, "release": 1, "health": 1, "close": 1}
	got := histogramCounts(t, reg)
	if len(got) != len(wantCounts) {
		t.Errorf("duration series %v, want %v", got, wantCounts)
	}
	for op, n := range wantCounts {
		if got[op] != n {
			t.Errorf("%s: %d durations observed, want %d", op, got[op], n)
		}
	}
}

// histogramCounts returns the number of observations of the duration
// histogram per op label, checking every series is for the memory backend.
func histogramCounts(t *testing.T, g prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	counts := map[string]uint64{}
	for _, mf := range families {
		if mf.GetName() != OperationDurationName {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["backend"] != "memory" || len(labels) != 2 {
				t.Errorf("duration series with labels %v, want op and backend=memory", labels)
			}
			counts[labels["op"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return counts
}

func TestDurationBuckets(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpAcquire, Status: protocol.StatusAcquired, Backend: "sqlite", Duration: 300 * time.Microsecond})
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Backend: "sqlite", Duration: 3 * time.Millisecond})
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpAcquire, Status: protocol.StatusTimeout, Backend: "sqlite", Duration: 20 * time.Second})

	const want = `
# HELP leasestore_operation_duration_seconds Duration of lease store operations from the call to its result, as seen by the runtime, in seconds.
# TYPE leasestore_operation_duration_seconds histogram
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.0005"} 1
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.001"} 1
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.002"} 1
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.004"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.008"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.016"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.032"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.064"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.128"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.256"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="0.512"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="1.024"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="2.048"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="4.096"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="8.192"} 2
leasestore_operation_duration_seconds_bucket{backend="sqlite",op="acquire",le="+Inf"} 3
leasestore_operation_duration_seconds_sum{backend="sqlite",op="acquire"} 20.0033
leasestore_operation_duration_seconds_count{backend="sqlite",op="acquire"} 3
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(want), OperationDurationName); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(obs.ops.WithLabelValues("acquire", "timeout", "sqlite", "false")); got != 1 {
		t.Errorf("timeout counter = %v, want 1", got)
	}
}

func TestNewRefusesSecondRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(reg)
	var are prometheus.AlreadyRegisteredError
	if err == nil || second != nil || !errors.As(err, &are) || !strings.HasPrefix(err.Error(), "promobserver: ") {
		t.Fatalf("second New on one registry = %v, %v; want a wrapped AlreadyRegisteredError", second, err)
	}
	// The registry still serves the first Observer, and nothing of the second.
	first.ObserveOperation(context.Background(), protocol.OperationEvent{Op: protocol.OpGet, Status: protocol.StatusFound, Backend: "memory"})
	if n, err := testutil.GatherAndCount(reg, OperationsTotalName); err != nil || n != 1 {
		t.Errorf("GatherAndCount = %d, %v; want 1 series", n, err)
	}
	if !reg.Unregister(first) {
		t.Error("Unregister(first) = false")
	}
	if _, err := New(reg); err != nil {
		t.Errorf("New after Unregister: %v", err)
	}
}

func TestNewNilUsesDefaultRegisterer(t *testing.T) {
	obs, err := New(nil)
	if err != nil {
		t.Fatalf("New(nil): %v", err)
	}
	defer prometheus.DefaultRegisterer.Unregister(obs)
	obs.ObserveOperation(context.Background(), protocol.OperationEvent{Op: protocol.OpRevoke, Status: protocol.StatusRevoked, Backend: "postgres"})
	n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, OperationsTotalName)
	if err != nil || n != 1 {
		t.Fatalf("default gatherer has %d %s series (%v), want 1", n, OperationsTotalName, err)
	}
	if _, err := New(nil); err == nil {
		t.Error("a second New(nil) registered on the default registry again")
	}
}

// Sweeps count as operations and add the rows they removed to their own
// counter.
func TestCountsSweptRows(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpSweep, Backend: "postgres", Items: 1000})
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpSweep, Backend: "postgres", Items: 7})
	obs.ObserveOperation(ctx, protocol.OperationEvent{Op: protocol.OpAcquire, Status: protocol.StatusAcquired, Backend: "postgres", Items: 3})
	want := `
# HELP leasestore_swept_rows_total Rows of ended leases removed by background sweeps (op sweep), by backend.
# TYPE leasestore_swept_rows_total counter
leasestore_swept_rows_total{backend="postgres"} 1007
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), SweptRowsTotalName); err != nil {
		t.Fatal(err)
	}
}

// A scheduler observed by the Observer: its gauges follow what it holds,
// and its events are counted by kind.
func TestSchedulerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(context.Background())
	s, err := scheduler.New(store, "w1", scheduler.Static("a", "b"), func(ctx context.Context, _ string, _ int64) { <-ctx.Done() },
		&scheduler.Config{Namespace: "scans", TTL: 3 * time.Second, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	gauge := func(g *prometheus.GaugeVec) float64 { return testutil.ToFloat64(g.WithLabelValues("scans", "w1")) }
	deadline := time.Now().Add(30 * time.Second)
	for gauge(obs.schedOwned) != 2 || gauge(obs.schedShare) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("owned %v, share %v; want 2, 2", gauge(obs.schedOwned), gauge(obs.schedShare))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	events := func(kind scheduler.EventKind) float64 {
		return testutil.ToFloat64(obs.schedEvents.WithLabelValues("scans", string(kind)))
	}
	if events(scheduler.EventAcquired) != 2 || events(scheduler.EventReleased) != 2 || events(scheduler.EventRound) < 1 {
		t.Errorf("events: acquired %v, released %v, rounds %v; want 2, 2, at least 1",
			events(scheduler.EventAcquired), events(scheduler.EventReleased), events(scheduler.EventRound))
	}
	if gauge(obs.schedOwned) != 0 || gauge(obs.schedWorkers) != 1 || gauge(obs.schedTargets) != 2 {
		t.Errorf("after shutdown: owned %v, workers %v, targets %v; want 0, 1, 2",
			gauge(obs.schedOwned), gauge(obs.schedWorkers), gauge(obs.schedTargets))
	}
	for _, name := range []string{SchedulerEventsTotalName, SchedulerOwnedTargetsName, SchedulerFairShareName, SchedulerWorkersName, SchedulerTargetsName} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series gathered (%v)", name, n, err)
		}
	}
}
