package protocol

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// sweepingFake is a fakeBackend that implements Sweeper and counts sweeps.
type sweepingFake struct {
	*fakeBackend
	sweeps atomic.Int64
}

func (b *sweepingFake) Sweep(context.Context, int, time.Duration) (SweepResult, error) {
	b.sweeps.Add(1)
	return SweepResult{}, nil
}

// A negative Every turns the sweep off: the same operations that make a
// runtime with a short Every sweep make one with Every < 0 never call
// Sweep. The defaults apply when the config says nothing.
func TestSweepOffAndDefaults(t *testing.T) {
	run := func(cfg *SweepConfig) int64 {
		b := &sweepingFake{fakeBackend: &fakeBackend{}}
		rt := New(b, &Config{Sweep: cfg})
		for range 20 {
			_, _ = rt.Get(context.Background(), GetRequest{Key: Key{Namespace: "ns", Name: "k"}})
			time.Sleep(time.Millisecond)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return b.sweeps.Load()
	}
	if n := run(&SweepConfig{Every: time.Millisecond}); n == 0 {
		t.Fatal("a runtime sweeping every millisecond did not sweep in 20 operations over 20ms")
	}
	if n := run(&SweepConfig{Every: -1}); n != 0 {
		t.Fatalf("a runtime with the sweep off swept %d times", n)
	}

	l := startSweep(&sweepingFake{fakeBackend: &fakeBackend{}}, nil, time.Second, nil)
	defer l.stop()
	if l == nil || l.cfg.Every != DefaultSweepEvery || l.cfg.Grace != DefaultSweepGrace || l.cfg.Batch != defaultSweepBatch {
		t.Fatalf("defaults: %+v", l)
	}
	if off := startSweep(&sweepingFake{fakeBackend: &fakeBackend{}}, &SweepConfig{Every: -1}, time.Second, nil); off != nil {
		t.Fatalf("Every < 0 made a sweep: %+v", off.cfg)
	}
	if startSweep(&fakeBackend{}, nil, time.Second, nil) != nil {
		t.Fatal("a backend that does not sweep got a sweep")
	}
}

// fullSweeper answers full batches (set aside, as after a mass expiry)
// for its first full calls, then short ones.
type fullSweeper struct {
	full, calls int
}

func (s *fullSweeper) Sweep(_ context.Context, max int, _ time.Duration) (SweepResult, error) {
	s.calls++
	if s.calls <= s.full {
		return SweepResult{SetAside: max}, nil
	}
	return SweepResult{}, nil
}

// A sweep goes on while batches come back full (set aside counts, not only
// removed), and stops at the first short one; a sweep that never meets a
// short batch stops after its share of Every.
func TestSweepRunsWhileBatchesAreFull(t *testing.T) {
	t.Parallel()
	s := &fullSweeper{full: 25}
	cfg := SweepConfig{Every: time.Hour, Batch: 10, Logger: slog.New(slog.DiscardHandler)}
	sweepOnce(context.Background(), s, "fake", cfg, time.Second, nil)
	if s.calls != 26 {
		t.Fatalf("%d calls, want 25 full batches and the short one", s.calls)
	}
	endless := &fullSweeper{full: math.MaxInt}
	cfg.Every = 20 * time.Millisecond
	done := make(chan struct{})
	go func() { sweepOnce(context.Background(), endless, "fake", cfg, time.Second, nil); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a sweep of endless full batches did not stop")
	}
	if endless.calls < 1 {
		t.Fatal("a sweep made no call")
	}
}
