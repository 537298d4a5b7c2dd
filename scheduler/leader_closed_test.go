package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// A worker runs while it holds a leadership lease taken through another
// runtime (Run(held.Context())). That runtime's Close ends the hold at
// once, the cause matching ErrLeaseLost and ErrClosed, and so ends Run's
// context: an ordinary stop, the worker's own store open. An acquire of
// the worker in flight then is cut short, its outcome unknown (here it
// took the key): the shutdown must resend it with its request id and
// release what it took, as for any acquire cut short by the stop. The
// runtime's timeout for the cut-short acquire carries the context's
// cause, which matches ErrClosed, and the worker takes it for its own
// store's closed answer ("not sent"): it forgets the acquire, and the
// lease stays in its open store, keeping the target from every worker
// until its TTL.
func TestAnAcquireCutShortByAStopWhoseCauseIsClosedIsResolved(t *testing.T) {
	t.Parallel()
	key := protocol.Key{Namespace: scheduler.DefaultNamespace, Name: "t"}
	b := &answerLostBackend{Backend: memstore.New(nil), key: key, taken: make(chan protocol.Lease, 1)}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	leaders := protocol.New(memstore.New(nil), nil)
	defer leaders.Close(context.Background())
	held, err := protocol.Hold(context.Background(), leaders,
		protocol.AcquireRequest{Key: protocol.Key{Namespace: "leaders", Name: "scheduler"}, Owner: "w1", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s, err := scheduler.New(rt, "w1", scheduler.Static("t"), idle,
		&scheduler.Config{TTL: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(held.Context()) }()
	var taken protocol.Lease
	select {
	case taken = <-b.taken:
	case <-time.After(10 * time.Second):
		t.Fatalf("no acquire of t within 10s; snapshot %+v", s.Snapshot())
	}
	// The leadership's runtime closes: the hold ends, and so does Run's
	// context, while the acquire of t waits for its answer.
	if err := leaders.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the hold did not end within 5s of its runtime's Close")
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, protocol.ErrClosed) {
		t.Fatalf("the hold's cause %v does not match ErrClosed: nothing tested", cause)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after its context ended, want nil: the worker's store is open", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return within 10s of its context's end")
	}
	res, err := rt.Get(context.Background(), protocol.GetRequest{Key: key})
	if err == nil && res.Lease != nil && res.Lease.Token == taken.Token {
		t.Errorf("after Run returned, the lease the cut-short acquire of t took (token %d, owner %s) is still live in the "+
			"worker's open store: the shutdown neither released it nor resolved the acquire; logs:\n%s", taken.Token, res.Lease.Owner, logs.String())
	}
}
