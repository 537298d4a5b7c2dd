// Package followprune is the scenario of a follower of one key over HTTP
// whose stream breaks while other keys' records are pruned: it must go on
// from the position the stream told it, not end behind the prune
// (audit.PositionFollower). Each backend's test runs it on its own store;
// a test's goroutine calls Run, which is not safe for concurrent use on one
// Store.
package followprune

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
	"github.com/leasestore/leasestore/protocol"
)

// Backend is what the scenario serves and writes to directly.
type Backend interface {
	protocol.Backend
	audit.Reader
	audit.Pruner
}

// Store is the store under test. Run owns Backend (it closes it).
type Store struct {
	Backend Backend
	// Tick runs before each write and before the prune's cut-off is read
	// from Now: a test clock advances, a real one lets time pass.
	Tick func()
	// Now is the store's clock, for the prune's cut-off.
	Now func() time.Time
}

// key is the scenario's key name in namespace "ns".
func key(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }

// Run serves s on a loopback port and follows ns/mine through the Go
// client with audit.Watch, its positions heard through WatchConfig.Passed.
// After mine's acquire it acquires other1 and other2, waits until the
// follow told a position past other2's record, breaks the stream and holds
// its reconnect until a prune of every record so far is done, then renews
// mine: the follow must yield that renew, and never end behind the prune.
func Run(t *testing.T, s Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := serveHeld(t, s.Backend)
	c, err := httpapi.NewClient(srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	mine := write(t, "acquire mine", protocol.StatusAcquired, func() (protocol.Result, error) {
		s.Tick()
		return s.Backend.Acquire(ctx, protocol.AcquireRequest{Key: key("mine"), Owner: "w", TTL: time.Hour, RequestID: "mine"})
	})

	var passed atomic.Int64 // the furthest position the follow told
	moved := make(chan struct{}, 1)
	cfg := &audit.WatchConfig{Passed: func(cursor string) {
		if id, err := audit.DecodeCursor(cursor); err == nil && id > passed.Load() {
			passed.Store(id)
			select {
			case moved <- struct{}{}:
			default:
			}
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
	// next returns the next record of the follow, skipping the failures it
	// goes on after (the broken stream), and fails the test when it ends.
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
		write(t, "acquire "+name, protocol.StatusAcquired, func() (protocol.Result, error) {
			s.Tick()
			return s.Backend.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Hour, RequestID: name})
		})
	}
	page, err := s.Backend.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "other2"})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("read other2's record: %+v, %v", page.Records, err)
	}
	others := page.Records[0].ID
	for deadline := time.After(10 * time.Second); passed.Load() < others; {
		select {
		case <-moved:
			continue
		case <-deadline:
			t.Errorf("the follow of ns/mine told no position past the records of other keys (through id %d) within 10s: told %d",
				others, passed.Load())
		}
		break
	}
	// The stream breaks, and its reconnect waits until the prune is done.
	srv.hold()
	s.Tick() // the records are stamped before the prune's cut-off
	if _, err := s.Backend.PruneAudit(ctx, audit.PruneRequest{Before: s.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	srv.release()
	write(t, "renew mine", protocol.StatusRenewed, func() (protocol.Result, error) {
		s.Tick()
		return s.Backend.Renew(ctx, protocol.RenewRequest{Key: key("mine"), Owner: "w", Token: mine.Lease.Token, TTL: time.Hour,
			RequestID: "renew"})
	})
	if rec := next("after the prune"); rec.RequestID != "renew" {
		t.Fatalf("the record after the prune: %+v, want the renew of mine", rec)
	}
}

// write runs op and fails the test unless it answered want.
func write(t *testing.T, what string, want protocol.Status, op func() (protocol.Result, error)) protocol.Result {
	t.Helper()
	res, err := op()
	if err != nil || res.Status != want {
		t.Fatalf("%s: %+v, %v; want %s", what, res, err, want)
	}
	return res
}

// heldServer serves a store on a loopback port; hold breaks its streams
// and keeps new follow requests waiting until release.
type heldServer struct {
	url     string
	srv     *httptest.Server
	held    atomic.Bool
	mu      sync.Mutex
	waiting chan struct{} // closed by release
}

// serveHeld serves b (owned) as leasectl serve does, its trail read
// through its runtime.
func serveHeld(t *testing.T, b protocol.Backend) *heldServer {
	t.Helper()
	rt := protocol.New(b, &protocol.Config{Sweep: &protocol.SweepConfig{Every: -1}})
	h, err := httpapi.NewHandler(rt, audit.RuntimeReader(rt), &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &heldServer{waiting: make(chan struct{})}
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
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("close the served store: %v", err)
		}
	})
	return s
}

// hold breaks the open streams and keeps follow requests waiting.
func (s *heldServer) hold() {
	s.mu.Lock()
	s.waiting = make(chan struct{})
	s.mu.Unlock()
	s.held.Store(true)
	s.srv.CloseClientConnections()
}

// release lets the waiting follow requests through.
func (s *heldServer) release() {
	if s.held.CompareAndSwap(true, false) {
		s.mu.Lock()
		close(s.waiting)
		s.mu.Unlock()
	}
}
