package audit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// collect ranges over a watch until it has n records or it fails.
func collect(t *testing.T, seq func(func(audit.Record, error) bool), n int) []audit.Record {
	t.Helper()
	var out []audit.Record
	for rec, err := range seq {
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		out = append(out, rec)
		if len(out) == n {
			break
		}
	}
	return out
}

func TestWatchOneKeyResumesByCursor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	backend := memstore.New(nil)
	rt := protocol.New(backend, nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "ns", Name: "k"}
	other := protocol.Key{Namespace: "ns", Name: "other"}
	cycle := func(key protocol.Key) {
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "o", Token: res.Lease.Token}); err != nil {
			t.Fatal(err)
		}
	}
	cycle(k)
	cycle(other)
	cycle(k)

	q := audit.Query{Namespace: "ns", Key: "k"}
	got := collect(t, audit.Watch(ctx, backend, q, nil), 2)
	if got[0].Op != protocol.OpAcquire || got[1].Op != protocol.OpRelease || got[0].Key != "k" || got[1].Key != "k" {
		t.Fatalf("first two changes of k: %+v", got)
	}
	q.Cursor = audit.EncodeCursor(got[1].ID)
	rest := collect(t, audit.Watch(ctx, backend, q, &audit.WatchConfig{Interval: time.Millisecond}), 2)
	if rest[0].ID <= got[1].ID || rest[0].Key != "k" || rest[1].Op != protocol.OpRelease || rest[1].Key != "k" {
		t.Fatalf("resumed after id %d: %+v", got[1].ID, rest)
	}

	// From the tail, a watch sees only what commits afterwards: a change
	// made while it waits.
	tail, err := audit.Tail(ctx, backend, audit.Query{Namespace: "ns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tail != audit.EncodeCursor(rest[1].ID) { // k's last release ends the trail
		t.Fatalf("tail %q, want after id %d", tail, rest[1].ID)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		cycle(other)
	}()
	news := collect(t, audit.Watch(ctx, backend, audit.Query{Namespace: "ns", Cursor: tail}, &audit.WatchConfig{Interval: time.Millisecond}), 2)
	if news[0].Key != "other" || news[0].Op != protocol.OpAcquire || news[1].Op != protocol.OpRelease {
		t.Fatalf("changes after the tail: %+v", news)
	}
}

// Tail of an empty trail is position 0, a1.0, not "", the start (which no
// read checks for a prune), and a watch from it sees the records written
// after it.
func TestTailOfAnEmptyTrailIsPositionZero(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	backend := memstore.New(nil)
	rt := protocol.New(backend, nil)
	defer rt.Close(ctx)
	for _, q := range []audit.Query{{}, {Namespace: "ns"}, {Namespace: "ns", Key: "k"}} {
		tail, err := audit.Tail(ctx, backend, q, nil)
		if err != nil || tail != audit.EncodeCursor(0) {
			t.Fatalf("tail of %+v in an empty trail: %q, %v; want %q", q, tail, err, audit.EncodeCursor(0))
		}
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, audit.Watch(ctx, backend, audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(0)}, &audit.WatchConfig{Interval: time.Millisecond}), 1)
	if got[0].Op != protocol.OpAcquire || got[0].Key != "k" {
		t.Fatalf("watch from a1.0: %+v; want the acquire of k", got)
	}
}

// failingReader fails its first reads, then reads through.
type failingReader struct {
	audit.Reader
	fails atomic.Int64
}

func (f *failingReader) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	if f.fails.Add(-1) >= 0 {
		return audit.Page{}, errors.New("injected outage")
	}
	return f.Reader.ReadAudit(ctx, q)
}

func TestWatchYieldsReadErrorsAndGoesOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	backend := memstore.New(nil)
	rt := protocol.New(backend, nil)
	defer rt.Close(ctx)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r := &failingReader{Reader: backend}
	r.fails.Store(2)
	var errs int
	for rec, err := range audit.Watch(ctx, r, audit.Query{Namespace: "ns"}, &audit.WatchConfig{Interval: time.Millisecond}) {
		if err != nil {
			errs++
			continue
		}
		if rec.Op != protocol.OpAcquire {
			t.Fatalf("record %+v", rec)
		}
		break
	}
	if errs != 2 {
		t.Fatalf("%d read errors yielded, want 2", errs)
	}
}

func TestWatchEndsWithContextAndRefusesInvalidQueries(t *testing.T) {
	t.Parallel()
	backend := memstore.New(nil)
	defer backend.Close(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	for _, err := range audit.Watch(ctx, backend, audit.Query{Namespace: "ns"}, &audit.WatchConfig{Interval: time.Millisecond}) {
		t.Fatalf("an empty trail yielded %v", err)
	}
	n := 0
	for _, err := range audit.Watch(t.Context(), backend, audit.Query{Key: "k"}, nil) {
		if err == nil {
			t.Fatal("an invalid query yielded a record")
		}
		n++
	}
	if n != 1 {
		t.Fatalf("an invalid query yielded %d errors, want 1 and the end", n)
	}
}
