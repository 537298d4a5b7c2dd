package backendkit

import (
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
