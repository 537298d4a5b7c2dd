package protocol

import (
	"context"
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
