package sqlite_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A follower of a namespace whose cursor is behind a prune resumed past
// the records the prune removed, without an error and without any sign of
// the gap (the prune's own record belongs to no namespace, so a
// namespace's follower never sees it). DESIGN.md: a follower paging by
// cursor never skips a record; etcd's follower stops with ErrCompacted
// rather than leave a silent gap. Now such a read fails, unavailable and
// matching audit.ErrPruned, naming the fix; a cursor at or after what went,
// a read from the start, and a quiet namespace's follower read as before.
func TestReadFromACursorBehindAPruneFails(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns", Follow: true}
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID) // the follower has read the acquire
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	// A quiet namespace: its one record is the oldest, so nothing of it
	// lies after its follower's cursor.
	quiet, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "quiet", Name: "q"}, Owner: "w",
		TTL: time.Hour, RequestID: "q"})
	wantStatus(t, "acquire in quiet", quiet, err, protocol.StatusAcquired)
	clock.Advance(time.Minute)
	later, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("later"), Owner: "w", TTL: time.Hour, RequestID: "l"})
	wantStatus(t, "acquire later", later, err, protocol.StatusAcquired)
	ids := recordIDs(t, b)
	pr, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.ReadAudit(ctx, q)
	if err == nil && len(next.Records) == 0 {
		t.Fatalf("follower at %s after a prune that removed %d records (3 of them after its cursor): "+
			"page %+v, no error: the renews it never read are gone without a trace", q.Cursor, pr.Removed, next)
	}
	wantPruned(t, "follower of ns at "+q.Cursor, next, err)

	all := q
	all.Namespace = ""
	_, err = b.ReadAudit(ctx, all)
	wantPruned(t, "follower of the whole trail at "+all.Cursor, audit.Page{}, err)

	// audit.Watch yields the failure once and ends, rather than retry it.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var watched []error
	for rec, err := range audit.Watch(wctx, b, q, &audit.WatchConfig{Interval: time.Millisecond}) {
		if err == nil {
			t.Fatalf("watch yielded %+v; want only the failure", rec)
		}
		watched = append(watched, err)
	}
	if wctx.Err() != nil || len(watched) != 1 || !errors.Is(watched[0], audit.ErrPruned) {
		t.Fatalf("watch from %s yielded %v (context: %v); want one error matching ErrPruned, then the end", q.Cursor, watched, wctx.Err())
	}

	// What still reads: a cursor at the last record that went, the quiet
	// namespace's follower, a read from the start, and newest first.
	for _, ok := range []audit.Query{
		{Namespace: "ns", Follow: true, Cursor: audit.EncodeCursor(ids["r2"])},
		{Namespace: "quiet", Follow: true, Cursor: audit.EncodeCursor(ids["q"])},
		{Namespace: "ns", Follow: true},
		{Follow: true, Cursor: audit.EncodeCursor(0)},
		{Namespace: "ns", Newest: true, Cursor: audit.EncodeNewestCursor(ids["l"] + 1)},
	} {
		p, err := b.ReadAudit(ctx, ok)
		if err != nil {
			t.Fatalf("read %+v after the prune: %v; want it served", ok, err)
		}
		if ok.Namespace == "ns" && !ok.Newest && (len(p.Records) != 1 || p.Records[0].ID != ids["l"]) {
			t.Fatalf("read %+v after the prune: %+v; want the one record left in ns", ok, p.Records)
		}
	}
}

// The database keeps where prunes left gaps, in each deletion's
// transaction, whoever deletes through the prune window: a prune by the
// previous release, which knows nothing of it, and each batch of a prune
// cut short.
func TestPruneGapIsKeptByTheDatabase(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	path := migratedFile(t)
	b := open(t, path, clock)
	for i := range 3 {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k" + string(rune('0'+i))), Owner: "w", TTL: time.Hour,
			RequestID: "a" + string(rune('0'+i))})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		clock.Advance(time.Second)
	}
	byRequest := recordIDs(t, b)
	ids := []int64{byRequest["a0"], byRequest["a1"], byRequest["a2"]}
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One batch of a prune of the previous release: the window, the
	// oldest two records, the window closed; no prune record yet.
	for _, stmt := range []string{
		`INSERT INTO leasestore_audit_prune (id, before) VALUES (1, 9223372036854775807)`,
		`DELETE FROM leasestore_audit WHERE id IN (SELECT id FROM leasestore_audit ORDER BY id LIMIT 2)`,
		`DELETE FROM leasestore_audit_prune WHERE id = 1`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	q := audit.Query{Namespace: "ns", Follow: true, Cursor: audit.EncodeCursor(ids[0])}
	_, err = b.ReadAudit(ctx, q)
	wantPruned(t, "follower at the first record after a batch removed the first two", audit.Page{}, err)
	q.Cursor = audit.EncodeCursor(ids[1])
	if p, err := b.ReadAudit(ctx, q); err != nil || len(p.Records) != 1 || p.Records[0].ID != ids[2] {
		t.Fatalf("follower at the last record removed: %+v, %v; want the third record", p, err)
	}
}

// Over the HTTP API a read, and a follow stream, from a cursor behind a
// prune fail as the store does: status unavailable with the store's
// message (not the fixed sentence that hides a store's failure), which the
// client turns back into an error matching audit.ErrPruned; the stream
// ends rather than reconnect to the same gap.
func TestReadOverHTTPFromACursorBehindAPruneFails(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b, err := sqlite.Open(ctx, migratedFile(t), sqlite.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	c := httpcontract.Serve(t, b, b) // owns b
	for i := range 3 {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k" + string(rune('0'+i))), Owner: "w", TTL: time.Hour,
			RequestID: "a" + string(rune('0'+i))})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		clock.Advance(time.Second)
	}
	ids := recordIDs(t, b)
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	q := audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(ids["a0"])}
	page, err := c.ReadAudit(ctx, q)
	wantPruned(t, "GET /v1/audit from "+q.Cursor, page, err)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var got []error
	for rec, err := range c.Follow(fctx, q) {
		if err == nil {
			t.Fatalf("follow over HTTP yielded %+v; want only the failure", rec)
		}
		got = append(got, err)
	}
	if fctx.Err() != nil || len(got) != 1 {
		t.Fatalf("follow over HTTP from %s: %v (context: %v); want one failure, then the end", q.Cursor, got, fctx.Err())
	}
	wantPruned(t, "GET /v1/audit/follow from "+q.Cursor, audit.Page{}, got[0])
}

// recordIDs returns the ids of b's records by request id.
func recordIDs(t *testing.T, b *sqlite.Backend) map[string]int64 {
	t.Helper()
	p, err := b.ReadAudit(ctxT(t), audit.Query{Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, r := range p.Records {
		ids[r.RequestID] = r.ID
	}
	return ids
}

// wantPruned fails the test unless err is a cursor-behind-a-prune failure:
// unavailable (as etcd's compacted follower), matching audit.ErrPruned,
// its message naming the prune and the way on.
func wantPruned(t *testing.T, what string, page audit.Page, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: page %+v, no error; want the read refused: records after the cursor were pruned", what, page)
	}
	if !errors.Is(err, audit.ErrPruned) || protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Fatalf("%s: %v (status %s); want unavailable matching audit.ErrPruned", what, err, protocol.StatusOf(err))
	}
	for _, want := range []string{audit.PrunedPrefix, "leasectl audit prune", "--since"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v; want the message to name %q", what, err, want)
		}
	}
}

// A follower of one key over HTTP whose stream broke reconnected from the
// last record it yielded: when a prune of other keys' records, which the
// server's stream had passed over, came while it was away, the reconnect
// was refused as behind a prune and the follow ended (audit.ErrPruned),
// though it had missed nothing. The stream now tells the client how far it
// has read (audit.WatchConfig.Passed reports it), and the client reconnects
// from there: it goes on, and yields the key's next record.
func TestFollowOverHTTPOutlivesAPruneOfRecordsItPassed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock := newClock()
	b, err := sqlite.Open(ctx, migratedFile(t), sqlite.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHeld(t, b)
	c, err := httpapi.NewClient(srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	mine, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("mine"), Owner: "w", TTL: time.Hour, RequestID: "mine"})
	wantStatus(t, "acquire mine", mine, err, protocol.StatusAcquired)

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
		clock.Advance(time.Second)
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Hour, RequestID: name})
		wantStatus(t, "acquire "+name, res, err, protocol.StatusAcquired)
	}
	others := recordIDs(t, b)["other2"]
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
	clock.Advance(time.Second)
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	srv.release()
	renewed, err := b.Renew(ctx, protocol.RenewRequest{Key: key("mine"), Owner: "w", Token: mine.Lease.Token, TTL: time.Hour,
		RequestID: "renew"})
	wantStatus(t, "renew mine", renewed, err, protocol.StatusRenewed)
	if rec := next("after the prune"); rec.RequestID != "renew" {
		t.Fatalf("the record after the prune: %+v, want the renew of mine", rec)
	}
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
