package sqlite_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// heldThenPutBack opens a Backend on a fresh file and returns it with a
// copy of the file taken before it issued anything, to put back under it
// (putBack) once a holder holds a lease.
func heldThenPutBack(t *testing.T) (string, []byte, *protocol.Runtime) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	path := migratedFile(t)
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(open(t, path, nil), nil)
	return path, backup, rt
}

// TestHoldLosesTheLeaseWhenTheFileIsPutBack: a Held whose store refuses
// every operation until its process restarts (its file put back under
// it: an error matching protocol.ErrRestartRequired) cannot trust its
// lease, and no retry mends the renewal: the Held loses the lease at once,
// its cause matching ErrLeaseLost and ErrRestartRequired, as it does on a
// refusal of its credentials, rather than retry the renewal as for an
// outage until the lease runs out by the local clock.
func TestHoldLosesTheLeaseWhenTheFileIsPutBack(t *testing.T) {
	t.Parallel()
	path, backup, rt := heldThenPutBack(t)
	h, err := protocol.Hold(context.Background(), rt, protocol.AcquireRequest{Key: key("held"), Owner: "w1", TTL: 30 * time.Second},
		&protocol.HoldConfig{RenewEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	putBack(t, path, backup)
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the Held kept the lease 10s after its store's file was put back (every renewal refused until a restart): " +
			"it retries them as for an outage until the lease runs out")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrRestartRequired) {
		t.Fatalf("cause %v; want lost, matching protocol.ErrRestartRequired", cause)
	}
}

// TestSchedulerLosesTheTargetWhenTheFileIsPutBack: the scheduler takes a
// renewal refused until the store restarts (protocol.ErrRestartRequired)
// as Hold does: the target's handler is cancelled at that round, its cause
// the refusal, not when the lease would run out by the local clock.
func TestSchedulerLosesTheTargetWhenTheFileIsPutBack(t *testing.T) {
	t.Parallel()
	const ttl = 12 * time.Second // a round every 4s
	path, backup, rt := heldThenPutBack(t)
	handler := make(chan context.Context, 1)
	s, err := scheduler.New(rt, "w1", scheduler.Static("t"), func(ctx context.Context, _ string, _ int64) {
		select {
		case handler <- ctx:
		default:
		}
		<-ctx.Done()
	}, &scheduler.Config{TTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var hctx context.Context
	select {
	case hctx = <-handler:
	case <-time.After(30 * time.Second):
		t.Fatal("the scheduler did not take t in 30s")
	}
	putBack(t, path, backup)
	at := time.Now()
	select {
	case <-hctx.Done():
	case <-time.After(2 * ttl):
		t.Fatal("t's handler ran on 2 TTLs after the store's file was put back")
	}
	cause := context.Cause(hctx)
	if !errors.Is(cause, protocol.ErrRestartRequired) {
		t.Errorf("t's handler was cancelled %v after the put-back with cause %v; want the renewal's refusal (matching "+
			"protocol.ErrRestartRequired) at the next round, not a retry until the lease's local deadline", time.Since(at).Round(time.Millisecond), cause)
	}
}
