package backendkit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCloserAnswersByItsContextWhileTheWorkWaits: a Close whose context
// ends while the work waits for something in flight (Await) returns at
// once, naming it; the work goes on, and a later Close returns its error.
func TestCloserAnswersByItsContextWhileTheWorkWaits(t *testing.T) {
	var c Closer
	release := make(chan struct{})
	stop := errors.New("closed with an error")
	work := func() error {
		c.Await("the write in flight", func() bool { return false }, func() { <-release })
		return stop
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	left, err := c.Close(ctx, work)
	if left != "the write in flight" || err != nil {
		t.Fatalf("Close cut off while the work waits: left %q, err %v; want the step and nil", left, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close cut off by a 50ms context returned after %v", d)
	}
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	if left, _ := c.Close(ended, func() error { t.Error("work ran twice"); return nil }); left == "" {
		t.Fatal("a second Close with an ended context, while the work still waits, did not say what it waits for")
	}
	close(release)
	if left, err := c.Close(context.Background(), nil); left != "" || !errors.Is(err, stop) {
		t.Fatalf("Close once the wait ended: left %q, err %v; want the work's error", left, err)
	}
}

// TestCloserFinishesWorkThatWaitsForNothing: a Close whose context has
// ended still waits for work that waits for nothing in flight (each Await
// done by its try), and returns its error.
func TestCloserFinishesWorkThatWaitsForNothing(t *testing.T) {
	var c Closer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var steps int
	left, err := c.Close(ctx, func() error {
		for range 3 {
			c.Await("nothing", func() bool { steps++; return true }, func() { t.Error("waited") })
			time.Sleep(time.Millisecond) // work that does not wait for anything in flight
		}
		return nil
	})
	if left != "" || err != nil || steps != 3 {
		t.Fatalf("Close with an ended context of work that waits for nothing: left %q, err %v after %d steps; want nil after 3", left, err, steps)
	}
}

func TestBackgroundTryWaitRefusesMoreAndSaysWhetherWorkRuns(t *testing.T) {
	var b Background
	release := make(chan struct{})
	done := b.Go(func() { <-release })
	if b.TryWait() {
		t.Fatal("TryWait while work runs reported none")
	}
	if b.Go(func() { t.Error("work ran after TryWait") }) != nil {
		t.Fatal("Go after TryWait returned a channel")
	}
	close(release)
	<-done
	if !b.TryWait() {
		t.Fatal("TryWait once the work ended reported work")
	}
}
