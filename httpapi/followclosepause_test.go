package httpapi_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// The client's Close ends a follow that is pausing between reconnects
// (the server unreachable, its pause grown to 5s), as it ends one that is
// streaming: the follow yields closed and returns. It slept out its pause
// first, holding its caller for up to 5s after Close.
func TestClientCloseEndsAFollowPausingBetweenReconnects(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there: every reconnect is refused at once
	c, err := httpapi.NewClient("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closed := make(chan time.Time, 1)
	var last error
	// The pauses after the failures go 50ms, 100ms, ... 3.2s, then 5s: the
	// eighth failure is followed by a pause of 5s.
	failures := 0
	for _, err := range c.Follow(ctx, audit.Query{Namespace: "ns"}) {
		last = err
		if err == nil || errors.Is(err, protocol.ErrClosed) {
			break
		}
		if failures++; failures == 8 {
			if err := c.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			closed <- time.Now()
		}
		if failures > 8 {
			break
		}
	}
	select {
	case at := <-closed:
		if waited := time.Since(at); waited > 2*time.Second || !errors.Is(last, protocol.ErrClosed) {
			t.Fatalf("the follow, pausing between reconnects, ended %s after the client's Close with %v; want it to end at once with closed",
				waited.Round(100*time.Millisecond), last)
		}
	default:
		t.Fatalf("the follow ended after %d failures with %v, before the client's Close", failures, last)
	}
}
