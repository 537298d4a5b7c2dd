package backendkit

import (
	"context"
	"testing"
	"time"
)

func TestBackgroundWaitWaitsForWorkAndRefusesMore(t *testing.T) {
	var b Background
	release := make(chan struct{})
	ended := make(chan struct{})
	done := b.Go(func() { <-release; close(ended) })
	if done == nil {
		t.Fatal("Go before Wait ran nothing")
	}
	waited := make(chan struct{})
	go func() { b.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while work ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the work ended")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Wait returned before the work ended")
	}
	<-done
	if b.Go(func() { t.Error("work ran after Wait") }) != nil {
		t.Fatal("Go after Wait returned a channel")
	}
}

func TestBackgroundGoAwaitAnswersByItsDeadlinePlusGrace(t *testing.T) {
	var b Background
	defer b.Wait()
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	b.GoAwait(ctx, 30*time.Millisecond, func() { <-release })
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Fatalf("GoAwait of work that outlives its context returned after %v, want about 50ms", d)
	}
	quick := time.Now()
	b.GoAwait(context.Background(), time.Hour, func() {})
	if d := time.Since(quick); d > 2*time.Second {
		t.Fatalf("GoAwait of work that ends at once returned after %v", d)
	}
}
