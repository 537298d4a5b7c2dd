// Package wakebench is the wake-up benchmark every backend runs: how soon
// a waiter blocked in AcquireWait takes a key after the holder released
// it, and how soon a holder (a Hold, a scheduler handler) hears a revoke.
// Each backend's BenchmarkWakeUp and BenchmarkLossHeard open the two
// runtimes and call [Run], [RunLoss] and [RunSchedulerLoss]. It imports no
// database driver.
package wakebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// Run measures, for each b.Loop iteration on a fresh key, the time from
// holder's release returning to waiter's AcquireWait returning, and
// reports wake-p50-ms and wake-p99-ms; acquire-p50-ms and acquire-p99-ms
// are holder's plain acquires of a free key in the same run, the floor any
// hand-over pays. waiter and holder may be one runtime.
func Run(b *testing.B, waiter, holder *protocol.Runtime) {
	ctx := context.Background()
	var wake, plain []time.Duration
	for i := 0; b.Loop(); i++ {
		k := protocol.Key{Namespace: "ns", Name: fmt.Sprintf("k%d", i)}
		t0 := time.Now()
		held, err := holder.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(t0))
		asleep := make(chan struct{}, 1)
		done := make(chan time.Time, 1)
		go func() {
			_, err := waiter.AcquireWait(ctx, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute},
				&protocol.WaitConfig{Recheck: time.Hour, Waiting: func(protocol.Lease) { asleep <- struct{}{} }})
			if err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		<-asleep
		if _, err := holder.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "holder", Token: held.Lease.Token}); err != nil {
			b.Fatal(err)
		}
		released := time.Now()
		wake = append(wake, (<-done).Sub(released))
	}
	ReportPercentiles(b, "wake", wake)
	ReportPercentiles(b, "acquire", plain)
}

// ReportPercentiles reports the 50th and 99th percentiles of ds in ms, as
// NAME-p50-ms and NAME-p99-ms. ds is sorted in place.
func ReportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.50), name+"-p50-ms")
	b.ReportMetric(at(0.99), name+"-p99-ms")
}

// RunLoss measures, for each b.Loop iteration on a fresh key, the time
// from a revoke through revoker returning to the context of a
// protocol.Hold through holder ending (the loss heard through the store's
// signal; the holder renews every 20 s, so a renewal never tells it), and
// reports loss-p50-ms and loss-p99-ms. Each hold is left 20 ms to make its
// subscription before the revoke. holder and revoker may be one runtime.
func RunLoss(b *testing.B, holder, revoker *protocol.Runtime) {
	ctx := context.Background()
	var loss []time.Duration
	for i := 0; b.Loop(); i++ {
		k := protocol.Key{Namespace: "ns", Name: fmt.Sprintf("loss%d", i)}
		h, err := protocol.Hold(ctx, holder, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute},
			&protocol.HoldConfig{RenewEvery: 20 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := revoker.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "bench", Reason: "loss"}); err != nil {
			b.Fatal(err)
		}
		revoked := time.Now()
		select {
		case <-h.Context().Done():
			loss = append(loss, time.Since(revoked))
		case <-time.After(10 * time.Second):
			b.Fatalf("the revoke of %s did not reach the holder within 10 s", k)
		}
		<-h.Done()
	}
	ReportPercentiles(b, "loss", loss)
}

// RunSchedulerLoss measures, for each b.Loop iteration on a fresh target,
// the time from a revoke of a scheduler's target through revoker returning
// to that target's handler's context ending, and reports loss-p50-ms and
// loss-p99-ms. Each iteration starts a scheduler (not measured) that
// renews every 20 s with a 1 min TTL, so only the store's signal tells it,
// waits for its handler to run and 20 ms more, revokes, and stops it.
// holder and revoker may be one runtime.
func RunSchedulerLoss(b *testing.B, holder, revoker *protocol.Runtime) {
	var loss []time.Duration
	for i := 0; b.Loop(); i++ {
		target := fmt.Sprintf("t%d", i)
		running := make(chan struct{})
		ended := make(chan time.Time, 1)
		handler := func(ctx context.Context, _ string, _ int64) {
			close(running)
			<-ctx.Done()
			ended <- time.Now()
		}
		s, err := scheduler.New(holder, fmt.Sprintf("w%d", i), scheduler.Static(target), handler,
			&scheduler.Config{Namespace: "loss", TTL: time.Minute, RenewEvery: 20 * time.Second,
				Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		select {
		case <-running:
		case <-time.After(10 * time.Second):
			b.Fatalf("the scheduler did not run %s within 10 s", target)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := revoker.Revoke(context.Background(), protocol.RevokeRequest{
			Key: protocol.Key{Namespace: "loss", Name: target}, Actor: "bench", Reason: "loss"}); err != nil {
			b.Fatal(err)
		}
		revoked := time.Now()
		select {
		case at := <-ended:
			loss = append(loss, at.Sub(revoked))
		case <-time.After(10 * time.Second):
			b.Fatalf("the revoke of %s did not reach its handler within 10 s", target)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
	}
	ReportPercentiles(b, "loss", loss)
}
