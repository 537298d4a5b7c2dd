package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

var testKey = protocol.Key{Namespace: "ns", Name: "job"}

func acquireReq(id string) protocol.AcquireRequest {
	return protocol.AcquireRequest{Key: testKey, Owner: "w1", TTL: time.Minute, RequestID: id}
}

// wantStatus checks that err is an *protocol.Error with status want.
func wantStatus(t *testing.T, what string, err error, want protocol.Status) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != want || !errors.Is(err, want.Sentinel()) {
		t.Fatalf("%s: error %v, want an *protocol.Error with status %q", what, err, want)
	}
}

func TestClosedHandle(t *testing.T) {
	ctx := t.Context()
	store := memstore.NewStore(nil)
	a, b := store.Handle(), store.Handle()
	res, err := a.Acquire(ctx, acquireReq("r1"))
	if err != nil || res.Status != protocol.StatusAcquired {
		t.Fatalf("acquire: %q %v", res.Status, err)
	}
	for i := range 2 {
		if err := a.Close(ctx); err != nil {
			t.Fatalf("close %d: %v", i+1, err)
		}
	}
	l := res.Lease
	_, err = a.Acquire(ctx, acquireReq("r2"))
	wantStatus(t, "acquire", err, protocol.StatusClosed)
	_, err = a.Renew(ctx, protocol.RenewRequest{Key: testKey, Owner: l.Owner, Token: l.Token, TTL: time.Minute, RequestID: "r3"})
	wantStatus(t, "renew", err, protocol.StatusClosed)
	_, err = a.Release(ctx, protocol.ReleaseRequest{Key: testKey, Owner: l.Owner, Token: l.Token, RequestID: "r4"})
	wantStatus(t, "release", err, protocol.StatusClosed)
	_, err = a.Revoke(ctx, protocol.RevokeRequest{Key: testKey, Actor: "ops", Reason: "r", RequestID: "r5"})
	wantStatus(t, "revoke", err, protocol.StatusClosed)
	_, err = a.Get(ctx, protocol.GetRequest{Key: testKey, RequestID: "r6"})
	wantStatus(t, "get", err, protocol.StatusClosed)
	_, err = a.List(ctx, protocol.ListRequest{Namespace: "ns", RequestID: "r7"})
	wantStatus(t, "list", err, protocol.StatusClosed)
	_, err = a.ReadAudit(ctx, audit.Query{})
	wantStatus(t, "read audit", err, protocol.StatusClosed)
	wantStatus(t, "health", a.Health(ctx), protocol.StatusClosed)

	// The other handle and the state are untouched.
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health of the other handle: %v", err)
	}
	got, err := b.Get(ctx, protocol.GetRequest{Key: testKey, RequestID: "r8"})
	if err != nil || got.Status != protocol.StatusFound || *got.Lease != *l {
		t.Fatalf("get through the other handle: %q %v", got.Status, err)
	}
	p, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("audit through the other handle: %+v %v", p, err)
	}
}

func TestDoneContextIsTimeout(t *testing.T) {
	b := memstore.New(nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Acquire(ctx, acquireReq("r1"))
	wantStatus(t, "acquire", err, protocol.StatusTimeout)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
	wantStatus(t, "health", b.Health(ctx), protocol.StatusTimeout)
	// Nothing was written.
	p, err := b.ReadAudit(t.Context(), audit.Query{})
	if err != nil || len(p.Records) != 0 {
		t.Fatalf("audit: %+v %v", p, err)
	}
}

func TestReadAuditInvalidQuery(t *testing.T) {
	b := memstore.New(nil)
	for _, q := range []audit.Query{{Key: "job"}, {Cursor: "x"}, {Limit: audit.MaxLimit + 1}} {
		_, err := b.ReadAudit(t.Context(), q)
		wantStatus(t, "read audit", err, protocol.StatusInvalid)
	}
}

func TestClock(t *testing.T) {
	// Times are read from Config.Now and kept at microsecond precision.
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	b := memstore.New(&memstore.Config{Now: func() time.Time { return at }})
	res, err := b.Acquire(t.Context(), acquireReq("r1"))
	if err != nil {
		t.Fatal(err)
	}
	want := at.Truncate(time.Microsecond)
	if l := res.Lease; !l.AcquiredAt.Equal(want) || !l.RenewedAt.Equal(want) || !l.ExpiresAt.Equal(want.Add(time.Minute)) ||
		l.AcquiredAt.Nanosecond()%1000 != 0 {
		t.Fatalf("lease times %v %v %v, want %v and +1m", l.AcquiredAt, l.RenewedAt, l.ExpiresAt, want)
	}

	// Without a clock, the store reads time.Now.
	before := time.Now().Truncate(time.Microsecond)
	res, err = memstore.New(nil).Acquire(t.Context(), acquireReq("r1"))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Lease.AcquiredAt; got.Before(before) || got.After(after) {
		t.Fatalf("acquired at %v, want between %v and %v", got, before, after)
	}
}

// A subscription that races the handle's Close either fails as closed or
// hears the Close: a waiter never sleeps on a closed handle until its
// recheck.
func TestSubscribeRacingCloseHearsIt(t *testing.T) {
	store := memstore.NewStore(nil)
	for i := range 5000 {
		h := store.Handle()
		start := make(chan struct{})
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			<-start
			_ = h.Close(t.Context())
		}()
		close(start)
		ch, cancel, err := h.Subscribe(t.Context(), testKey)
		<-closed
		if err != nil {
			wantStatus(t, "subscribe racing close", err, protocol.StatusClosed)
			continue
		}
		select {
		case <-ch:
		default:
			cancel()
			t.Fatalf("round %d: a subscription made as the handle closed heard no signal of the close", i)
		}
		cancel()
	}
}
