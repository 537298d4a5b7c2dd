package schedulertest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// runOne runs a scheduler "w1" with cfg (its logger set to the test's log,
// warnings and above) until the test ends.
func runOne(t *testing.T, store protocol.Store, targets scheduler.Targets, handler scheduler.Handler, cfg *scheduler.Config) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sched, err := scheduler.New(store, "w1", targets, handler, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitUntil polls cond every millisecond until it holds, and returns how
// long that took; it fails t when within passes first.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// testHearsRevoke: a worker renewing every 20 s hears of a revoke of one
// of its targets through the store's signal: that handler's context ends,
// with a cause matching protocol.ErrLeaseLost, within lossBound, long
// before the next renewal; the other handlers run on.
func testHearsRevoke(t *testing.T, newHarness Factory) {
	const (
		lossTTL   = time.Minute
		lossRenew = 20 * time.Second
		lossBound = 5 * time.Second // generous on a loaded machine; figures in internal/testkit/wakebench
	)
	h := newHarness(t)
	store, admin := h.NewStore(t), h.NewStore(t)
	t.Cleanup(func() {
		_ = store.Close(context.Background())
		_ = admin.Close(context.Background())
	})
	var (
		mu    sync.Mutex
		ended = map[string]error{} // target -> cause, when its handler's context ended
		runs  = map[string]int64{} // target -> token of the running handler
	)
	handler := func(ctx context.Context, target string, token int64) {
		mu.Lock()
		runs[target] = token
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		ended[target] = context.Cause(ctx)
		mu.Unlock()
	}
	targets := []string{"a", "b", "c"}
	runOne(t, store, scheduler.Static(targets...), handler,
		&scheduler.Config{Namespace: "loss", TTL: lossTTL, RenewEvery: lossRenew})
	wait := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		return waitUntil(t, what, within, cond)
	}
	wait("every handler runs", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(targets)
	})
	start := time.Now()
	res, err := admin.Revoke(context.Background(), protocol.RevokeRequest{
		Key: protocol.Key{Namespace: "loss", Name: "b"}, Actor: "op", Reason: "test"})
	if err != nil {
		t.Fatalf("revoke: %v (%s)", err, res.Status)
	}
	took := wait("the revoked target's handler hears of it", lossBound, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := ended["b"]
		return ok
	})
	t.Logf("revoke to the handler's context done: %v (since the revoke returned: %v)", time.Since(start), took)
	mu.Lock()
	defer mu.Unlock()
	if cause := ended["b"]; !errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("the revoked target's handler ended with %v, want a loss", cause)
	}
	for _, other := range []string{"a", "c"} {
		if cause, ok := ended[other]; ok {
			t.Fatalf("target %s's handler ended too: %v", other, cause)
		}
	}
}
