package cli

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// streamingReader is an [audit.Follower] as the interface describes one
// (the etcd backend is such): its Follow streams from q.Cursor, from the
// start of the trail when q has none, whatever q.Since says.
type streamingReader struct{ r audit.Reader }

func (s streamingReader) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	return s.r.ReadAudit(ctx, q)
}

func (s streamingReader) Follow(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error] {
	return audit.Watch(ctx, s.r, q, &audit.WatchConfig{Interval: 5 * time.Millisecond})
}

// acquirer returns a function that acquires a key of namespace ns on b.
func acquirer(t *testing.T, b protocol.Backend) func(name string) {
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return func(name string) {
		t.Helper()
		if _, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: name}, Owner: "o", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
}

// audit --follow --since T on a store that streams its trail (etcd) prints
// the records from T on, as it does on a polled store, not the whole trail.
func TestAuditFollowSinceOnAStreamingStore(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	backend := memstore.New(&memstore.Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	acquire := acquirer(t, backend)
	acquire("old-1")
	acquire("old-2")
	mu.Lock()
	clock = clock.Add(time.Hour)
	mu.Unlock()
	acquire("new")

	var out syncbuf.Buffer
	a := &app{stdout: &out, log: slog.New(slog.NewTextHandler(io.Discard, nil)), red: newRedactor(), timeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	q := audit.Query{Namespace: "ns", Since: clock.Add(-time.Minute)}
	go func() { done <- a.followAudit(ctx, streamingReader{backend}, q, 5*time.Millisecond) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ns/new") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // anything else it would print
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "ns/new") || strings.Contains(s, "old-") {
		t.Fatalf("audit --follow --since (an hour after old-1 and old-2) on a streaming store printed:\n%s\nwant the record of new only", s)
	}
}

// flakyReader fails its read number failAt (counting from 1), as a
// database or a server that restarts does.
type flakyReader struct {
	r      audit.Reader
	failAt int64
	reads  *atomic.Int64
}

func (f flakyReader) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	if f.reads.Add(1) == f.failAt {
		return audit.Page{}, &protocol.Error{Op: protocol.OpAudit, Status: protocol.StatusUnavailable, Message: "restarting"}
	}
	return f.r.ReadAudit(ctx, q)
}

// ridesOut runs follow (a follower from after the record of old) with an
// app printing to a buffer and a reader whose second read fails, writes
// the record of new once the failure is behind, and checks that the
// follower printed it, went on, and logged the failure.
func ridesOut(t *testing.T, what string, follow func(ctx context.Context, a *app, r audit.Reader, q audit.Query) error) {
	t.Helper()
	backend := memstore.New(nil)
	acquire := acquirer(t, backend)
	acquire("old")
	var out, logs syncbuf.Buffer
	a := &app{stdout: &out, log: slog.New(slog.NewTextHandler(&logs, nil)), red: newRedactor(), timeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	r := flakyReader{r: backend, failAt: 2, reads: new(atomic.Int64)}
	q := audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(1)} // from now on, as the commands start
	go func() { done <- follow(ctx, a, r, q) }()
	time.Sleep(100 * time.Millisecond) // the failure is behind
	acquire("new")
	deadline := time.After(10 * time.Second)
	for !strings.Contains(out.String(), "ns/new") {
		select {
		case err := <-done:
			t.Fatalf("%s ended with %v after a failure of a quiet trail, want it to go on; log:\n%s", what, err, logs.String())
		case <-deadline:
			t.Fatalf("%s never printed the new record:\n%s", what, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "restarting") {
		t.Errorf("%s did not log the failure:\n%s", what, logs.String())
	}
}

// audit --follow on a store that streams its trail (etcd, a served store)
// rides out a failure while the trail is quiet, as it does on a polled
// store: the failure is logged and the follow goes on.
func TestAuditFollowOnAStreamingStoreRidesOutAFailure(t *testing.T) {
	t.Parallel()
	ridesOut(t, "audit --follow", func(ctx context.Context, a *app, r audit.Reader, q audit.Query) error {
		return a.followAudit(ctx, streamingReader{r}, q, 5*time.Millisecond)
	})
}

// watch rides out a failed read while the trail is quiet, as audit
// --follow does: the failure is logged and the watch goes on.
func TestWatchRidesOutAFailure(t *testing.T) {
	t.Parallel()
	ridesOut(t, "watch", func(ctx context.Context, a *app, r audit.Reader, q audit.Query) error {
		backend := r.(flakyReader).r.(protocol.Backend)
		rt := protocol.New(backend, nil)
		defer rt.Close(context.Background())
		s := &store{rt: rt, audit: r, backend: "memory"}
		cfg := &audit.WatchConfig{Interval: 5 * time.Millisecond, ReadTimeout: time.Second}
		return a.followWithExpiries(ctx, s, q, cfg, newExpiryWatch(), func(rec audit.Record) { a.printText(formatRecordLine(rec)) })
	})
}
