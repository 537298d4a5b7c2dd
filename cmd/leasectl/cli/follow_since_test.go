package cli

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"strings"
	"sync"
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

// audit --follow --since T on a store that streams its trail (etcd) prints
// the records from T on, as it does on a polled store, not the whole trail.
func TestAuditFollowSinceOnAStreamingStore(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	backend := memstore.New(&memstore.Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	rt := protocol.New(backend, nil)
	defer rt.Close(context.Background())
	acquire := func(name string) {
		t.Helper()
		if _, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: name}, Owner: "o", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
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
