package audit_test

import (
	"context"
	"errors"
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

func TestRuntimeReaderReadsThroughTheRuntime(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var events []protocol.OperationEvent
	rt := protocol.New(memstore.New(nil), &protocol.Config{Observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})})
	key := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r := audit.RuntimeReader(rt)
	page, err := r.ReadAudit(ctx, audit.Query{Namespace: "ns"})
	if err != nil || len(page.Records) != 1 || page.Records[0].Status != protocol.StatusAcquired {
		t.Fatalf("ReadAudit = %+v, %v; want the acquire's record", page, err)
	}
	mu.Lock()
	last := events[len(events)-1]
	mu.Unlock()
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
