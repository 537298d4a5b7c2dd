package audit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// noTrail is a backend that keeps no audit trail.
type noTrail struct{ protocol.Backend }

// observedRuntime returns a runtime over a new memstore and a function
// returning the events its observer heard so far.
func observedRuntime() (*protocol.Runtime, func() []protocol.OperationEvent) {
	var mu sync.Mutex
	var events []protocol.OperationEvent
	rt := protocol.New(memstore.New(nil), &protocol.Config{Observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})})
	return rt, func() []protocol.OperationEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
}

func TestRuntimeReaderReadsThroughTheRuntime(t *testing.T) {
	ctx := context.Background()
	rt, events := observedRuntime()
	key := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r := audit.RuntimeReader(rt)
	page, err := r.ReadAudit(ctx, audit.Query{Namespace: "ns"})
	if err != nil || len(page.Records) != 1 || page.Records[0].Status != protocol.StatusAcquired {
		t.Fatalf("ReadAudit = %+v, %v; want the acquire's record", page, err)
	}
	seen := events()
	last := seen[len(seen)-1]
	if last.Op != protocol.OpAudit || last.Status != "" {
		t.Errorf("the observer's last event = %+v, want a successful %s", last, protocol.OpAudit)
	}

	// A bad query never reaches the backend.
	_, err = r.ReadAudit(ctx, audit.Query{Key: "k"})
	var e *protocol.Error
	if !errors.As(err, &e) || e.Status != protocol.StatusInvalid || e.Op != protocol.OpAudit {
		t.Errorf("ReadAudit of a key without namespace = %v, want invalid for op audit", err)
	}

	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAudit(ctx, audit.Query{Namespace: "ns"}); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("ReadAudit after Close = %v, want closed", err)
	}
}

func TestRuntimeReaderOfABackendWithoutTrail(t *testing.T) {
	rt := protocol.New(noTrail{memstore.New(nil)}, nil)
	defer func() { _ = rt.Close(context.Background()) }()
	_, err := audit.RuntimeReader(rt).ReadAudit(context.Background(), audit.Query{})
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "keeps no audit trail") {
		t.Errorf("ReadAudit = %v, want unavailable saying the store keeps no trail", err)
	}
}

func TestRuntimeReaderAppliesTheDefaultDeadline(t *testing.T) {
	rt := protocol.New(memstore.New(nil), &protocol.Config{DefaultTimeout: time.Minute})
	defer func() { _ = rt.Close(context.Background()) }()
	var deadline time.Time
	var ok bool
	err := rt.Do(context.Background(), protocol.OpAudit, func(ctx context.Context, _ protocol.Backend) error {
		deadline, ok = ctx.Deadline()
		return nil
	})
	if err != nil || !ok || time.Until(deadline) < 50*time.Second {
		t.Errorf("Do gave fn deadline %v (set %v), err %v; want about a minute from now", deadline, ok, err)
	}
}

// Asking whether a runtime's backend streams its trail (FollowerOf, which
// Watch does on every call) reads nothing, so the observer (the
// operation metrics) hears of no audit operation.
func TestFollowerOfARuntimeReaderIsNoOperation(t *testing.T) {
	rt, events := observedRuntime()
	defer rt.Close(context.Background())
	if _, ok := audit.FollowerOf(audit.RuntimeReader(rt)); ok {
		t.Fatal("memstore is no Follower")
	}
	if seen := events(); len(seen) != 0 {
		t.Fatalf("FollowerOf was observed as %+v, want no operation", seen)
	}
}
