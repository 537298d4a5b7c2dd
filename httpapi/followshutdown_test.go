package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// readSpy is an audit reader that notes the cursor of each follower's
// read, so that a test knows how far a follow stream's watch has read:
// the watch reads from a cursor only after it handed the stream the
// position that cursor is.
type readSpy struct {
	audit.Reader
	mu    sync.Mutex
	from  int64         // the furthest cursor read from
	moved chan struct{} // closed and replaced when from moves
}

func newReadSpy(r audit.Reader) *readSpy { return &readSpy{Reader: r, moved: make(chan struct{})} }

func (s *readSpy) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	if id, err := audit.DecodeCursor(q.Cursor); err == nil && q.Follow {
		s.mu.Lock()
		if id > s.from {
			s.from = id
			close(s.moved)
			s.moved = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return s.Reader.ReadAudit(ctx, q)
}

// readFrom waits until a follower read from a cursor at or past id.
func (s *readSpy) readFrom(t *testing.T, id int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		from, moved := s.from, s.moved
		s.mu.Unlock()
		if from >= id {
			return
		}
		select {
		case <-moved:
		case <-timeout:
			t.Fatalf("no follower's read from a cursor at or past id %d within 10s (the furthest: %d)", id, from)
		}
	}
}

// TestFollowTellsItsPositionAtShutdown: a follow stream of one key that
// has read past other keys' records since the last position it sent
// tells that position before the server's graceful shutdown ends it, so
// that its client resumes on the next server from there, not from an
// older place a prune may have left behind.
func TestFollowTellsItsPositionAtShutdown(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	spy := newReadSpy(b)
	h, err := httpapi.NewHandler(rt, spy, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.RegisterOnShutdown(h.CloseStreams) // as leasectl serve does
	srv.Start()
	defer srv.Close()

	hold(t, rt, protocol.Key{Namespace: "ns", Name: "mine"}, "w")
	raw := openStream(t, srv.URL+"/v1/audit/follow?namespace=ns&key=mine&cursor="+audit.EncodeCursor(0))
	// next returns the next event, failing the test if the stream ended.
	next := func(what string) (string, string) {
		t.Helper()
		name, data, _, ok := raw.rawEvent()
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return name, data
	}
	position := func(data string) int64 {
		t.Helper()
		var p wire.FollowPosition
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			t.Fatalf("position %q: %v", data, err)
		}
		id, err := audit.DecodeCursor(p.Cursor)
		if err != nil {
			t.Fatalf("position %q: %v", data, err)
		}
		return id
	}
	if name, _ := next("first event"); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	name, data := next("mine's record")
	var rec wire.Record
	if err := json.Unmarshal([]byte(data), &rec); name != "record" || err != nil || rec.Key != "mine" {
		t.Fatalf("event %q %s, want mine's record", name, data)
	}
	// The first position past another key's record goes at once; the
	// next may go a second after it at the soonest.
	hold(t, rt, protocol.Key{Namespace: "ns", Name: "other1"}, "w")
	name, data = next("a position past other1")
	if name != "position" {
		t.Fatalf("event %q %s, want a position past other1's record", name, data)
	}
	told := position(data) // the last position the stream sent
	if told <= rec.ID {
		t.Fatalf("position %s, want one past other1's record", data)
	}
	hold(t, rt, protocol.Key{Namespace: "ns", Name: "other2"}, "w")
	page, err := b.ReadAudit(t.Context(), audit.Query{Namespace: "ns", Key: "other2"})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("other2's record: %+v, %v", page.Records, err)
	}
	read := page.Records[0].ID
	spy.readFrom(t, read) // the stream holds the position past other2

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Config.Shutdown(ctx) }()
	for {
		name, data := next("the end at shutdown")
		if name == "end" {
			break
		}
		if name == "position" {
			told = position(data)
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if told < read {
		t.Fatalf("the stream's last position before its end at shutdown was id %d, want at least %d: "+
			"the server had read past other2's record and did not say so", told, read)
	}
}
