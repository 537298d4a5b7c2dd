package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// A follower of one key through a served etcd store keeps its place past
// other keys' records across a broken stream, as through a served SQL
// store (sqlite's TestFollowOverHTTPOutlivesAPruneOfRecordsItPassed; the
// operator guide: "through a served store across a broken stream too, from
// the stream's position events"): a prune of those records while it is
// away must not end it behind the prune. The server's stream over etcd
// (the backend's own Follow) told no position, so the client reconnected
// from its last record, below what the prune removed.
func TestFollowOverHTTPOutlivesAPruneOfRecordsItPassed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := openOwned(t, &etcd.Config{Prefix: prefix})
	srv := serveHeldEtcd(t, b)
	c, err := httpapi.NewClient(srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rt := protocol.New(c, nil)
	mine, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("mine"), Owner: "w", TTL: time.Hour, RequestID: "mine"})
	if err != nil {
		t.Fatal(err)
	}

	var passed atomic.Int64
	cfg := &audit.WatchConfig{Passed: func(cursor string) {
		if id, err := audit.DecodeCursor(cursor); err == nil && id > passed.Load() {
			passed.Store(id)
		}
	}}
	type item struct {
		rec audit.Record
		err error
	}
	items := make(chan item)
	wctx, stop := context.WithCancel(ctx)
	go func() {
		defer close(items)
		for rec, err := range audit.Watch(wctx, c, audit.Query{Namespace: "ns", Key: "mine"}, cfg) {
			select {
			case items <- item{rec, err}:
			case <-wctx.Done():
				return
			}
		}
	}()
	defer func() {
		stop()
		for range items {
		}
	}()
	next := func(what string) audit.Record {
		t.Helper()
		for {
			select {
			case it, ok := <-items:
				switch {
				case !ok:
					t.Fatalf("%s: the follow ended", what)
				case errors.Is(it.err, audit.ErrPruned):
					t.Fatalf("%s: the follow of ns/mine ended behind a prune that removed only records it had passed: %v", what, it.err)
				case it.err == nil:
					return it.rec
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no record within 10s", what)
			}
		}
	}
	if rec := next("first record"); rec.RequestID != "mine" {
		t.Fatalf("first record %+v, want the acquire of mine", rec)
	}
	for _, name := range []string{"other1", "other2"} {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Hour, RequestID: name}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "other2"})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("read other2's record: %+v, %v", page.Records, err)
	}
	others := page.Records[0].ID
	for deadline := time.Now().Add(10 * time.Second); passed.Load() < others && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if passed.Load() < others {
		t.Errorf("the follow of ns/mine told no position past the records of other keys (through id %d) within 10s: told %d",
			others, passed.Load())
	}
	srv.hold()
	time.Sleep(10 * time.Millisecond) // the records are stamped before the prune's cut-off
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	srv.release()
	if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: key("mine"), Owner: "w", Token: mine.Lease.Token, TTL: time.Hour,
		RequestID: "renew"}); err != nil {
		t.Fatal(err)
	}
	if rec := next("after the prune"); rec.RequestID != "renew" {
		t.Fatalf("the record after the prune: %+v, want the renew of mine", rec)
	}
}

// heldEtcdServer serves a store on a loopback port; hold breaks its
// streams and keeps new follow requests waiting until release.
type heldEtcdServer struct {
	url     string
	srv     *httptest.Server
	held    atomic.Bool
	mu      sync.Mutex
	waiting chan struct{}
}

func serveHeldEtcd(t *testing.T, b protocol.Backend) *heldEtcdServer {
	t.Helper()
	rt := protocol.New(b, &protocol.Config{Sweep: &protocol.SweepConfig{Every: -1}})
	h, err := httpapi.NewHandler(rt, audit.RuntimeReader(rt), &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &heldEtcdServer{waiting: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audit/follow" && s.held.Load() {
			s.mu.Lock()
			waiting := s.waiting
			s.mu.Unlock()
			select {
			case <-waiting:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	s.url = s.srv.URL
	t.Cleanup(func() {
		s.release()
		h.CloseStreams()
		s.srv.Close()
		_ = rt.Close(context.Background())
	})
	return s
}

func (s *heldEtcdServer) hold() {
	s.mu.Lock()
	s.waiting = make(chan struct{})
	s.mu.Unlock()
	s.held.Store(true)
	s.srv.CloseClientConnections()
}

func (s *heldEtcdServer) release() {
	if s.held.CompareAndSwap(true, false) {
		s.mu.Lock()
		close(s.waiting)
		s.mu.Unlock()
	}
}
