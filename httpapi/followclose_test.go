package httpapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// The client's Close ends a follow that is streaming: the follow yields
// closed and returns, as its other calls answer closed once Close began.
// It went on reading the open stream (the server's heartbeats keep it
// alive) until the server ended it, so a closed client kept a connection
// and its caller's goroutine for as long as the server ran.
func TestClientCloseEndsAStreamingFollow(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	c, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.Acquire(context.Background(), protocol.AcquireRequest{
		Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 8)
	ended := make(chan struct{})
	// A follow still streaming when the test fails holds the server's
	// Close (in an earlier cleanup) until it ends: end it first.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-ended })
	go func() {
		defer close(ended)
		for _, err := range c.Follow(ctx, audit.Query{Namespace: "ns"}) {
			got <- err
			if err != nil {
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the follow's first yield: %v, want the acquire's record", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follow yielded nothing within 10s")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the follow still streamed 5s after the client's Close")
	}
	if err := <-got; !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("the follow ended with %v, want closed", err)
	}
}
