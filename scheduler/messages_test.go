package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// New's error says "scheduler:" once, not once for New and again for the
// config ("scheduler: new: scheduler: config: ttl: ...").
func TestNewErrorSaysSchedulerOnce(t *testing.T) {
	t.Parallel()
	_, err := scheduler.New(memstore.New(nil), "w1", scheduler.Static("t"), func(context.Context, string, int64) {},
		&scheduler.Config{RenewEvery: -time.Second})
	if err == nil {
		t.Fatal("New accepted a RenewEvery of -1s")
	}
	if n := strings.Count(err.Error(), "scheduler:"); n != 1 || !strings.Contains(err.Error(), "renew every") {
		t.Fatalf("New's error %q says \"scheduler:\" %d times; want once, and naming renew every", err, n)
	}
}

// A store closed before Run took anything: Run's error matches ErrClosed
// and does not claim that every lease was lost, for none was held.
func TestRunOnAStoreClosedBeforeSaysNothingWasLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	rt.Close(ctx)
	s, err := scheduler.New(rt, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) { <-ctx.Done() },
		&scheduler.Config{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = s.Run(rctx)
	if !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("Run on a closed store = %v, want an error matching ErrClosed", err)
	}
	if strings.Contains(err.Error(), "every lease was lost") || strings.Contains(err.Error(), "none released") {
		t.Fatalf("Run on a store closed before it took anything = %q; want it to say no lease was held, not that every lease was lost", err)
	}
}

// One worker holding one target says "1 worker", "1 target" in why it
// holds it, not "1 workers".
func TestReasonCountsInTheSingular(t *testing.T) {
	t.Parallel()
	s, err := scheduler.New(memstore.New(nil), "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) { <-ctx.Done() },
		&scheduler.Config{TTL: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if snap := s.Snapshot(); len(snap.Owned) == 1 {
			r := snap.Owned[0].Reason
			if strings.Contains(r, "1 workers") || strings.Contains(r, "1 targets") || !strings.Contains(r, "1 worker") {
				t.Fatalf("the reason %q counts one worker and one target in the plural", r)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the worker holds no target after 5s: %+v", s.Snapshot())
}

// One bad duration is one error: the settings that default from it (a
// RenewEvery from the TTL, an OpTimeout from RenewEvery, MaxBackoff from
// the TTL) are not refused again for the value they took from it.
func TestNewNamesOnlyTheBadDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  scheduler.Config
		want string
	}{
		{"renew every", scheduler.Config{RenewEvery: -time.Second}, "renew every"},
		{"ttl", scheduler.Config{TTL: -time.Second}, "ttl"},
	} {
		_, err := scheduler.New(memstore.New(nil), "w1", scheduler.Static("t"), func(context.Context, string, int64) {}, &tc.cfg)
		if err == nil {
			t.Fatalf("New accepted %s -1s", tc.name)
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want+":") {
			t.Errorf("New with %s -1s (the others defaulting): %q; want one error, naming %s only", tc.name, err, tc.want)
		}
	}
}
