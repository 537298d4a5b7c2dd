package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// answerLostBackend is a backend whose first acquire of key takes effect
// (the lease is taken in the store) but whose answer does not come back
// until the caller's context ends, as on a network that loses it.
type answerLostBackend struct {
	*memstore.Backend
	key   protocol.Key
	once  sync.Once
	taken chan protocol.Lease // the lease the lost acquire took
}

func (b *answerLostBackend) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := b.Backend.Acquire(ctx, req)
	if req.Key != b.key || err != nil || res.Lease == nil {
		return res, err
	}
	lose := false
	b.once.Do(func() { lose = true })
	if !lose {
		return res, err
	}
	b.taken <- *res.Lease
	<-ctx.Done()
	return protocol.Result{}, ctx.Err()
}

// An acquire in flight when the worker hears that its store was closed
// (the runtime's Close, which waited for it in vain, closed the backend
// under it, and a lease's watch read closed) is cut short by the
// worker's stop: its outcome is unknown, and the lease it took lives in
// the store until its TTL. The shutdown must warn about it, as it warns
// about every acquire whose answer was lost when the store closed
// (TestOrphanResentToAClosedStoreIsWarnedAbout). The worker stops with
// the store's closed error as its context's cause, so the runtime's
// timeout for the cut-short acquire carries that cause; the worker takes
// it for a closed answer ("not sent") and forgets the acquire.
func TestAnAcquireCutShortByTheClosedStopIsWarnedAbout(t *testing.T) {
	t.Parallel()
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	b := &answerLostBackend{Backend: memstore.New(nil), key: key, taken: make(chan protocol.Lease, 1)}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	var logs syncbuf.Buffer
	s, err := scheduler.New(rt, "w1", scheduler.Static("t"), idle,
		&scheduler.Config{TTL: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var taken protocol.Lease
	select {
	case taken = <-b.taken:
	case <-time.After(10 * time.Second):
		t.Fatalf("no acquire of t within 10s; snapshot %+v", s.Snapshot())
	}
	// The store closes while the acquire's answer is on its way: the
	// runtime waits for it 300ms, then closes the backend, which signals
	// the membership's watch, whose get answers closed.
	cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_ = rt.Close(cctx)
	ccancel()
	select {
	case err := <-done:
		if !errors.Is(err, protocol.ErrClosed) {
			t.Fatalf("Run returned %v, want an error matching ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatalf("Run did not return within 10s of the store's Close")
	}
	if logLine(logs.String(), "level=WARN", "key=scheduler/t ") == "" {
		t.Errorf("the acquire of t took token %d in the store, its answer lost when the worker stopped at the store's close; "+
			"the shutdown's logs do not warn that this lease was not released (it runs out after its TTL):\n%s", taken.Token, logs.String())
	}
}
