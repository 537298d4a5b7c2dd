package sqlite_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/followprune"
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
// matching audit.ErrPruned, naming the fix (so does one from a1.0, a
// position, not the start); a cursor at or after what went, a read from
// the start (no cursor), and a quiet namespace's follower read as before.
func TestReadFromACursorBehindAPruneFails(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: 30 * time.Second, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns", Follow: true}
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID) // the follower has read the acquire
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: 30 * time.Second,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	// A quiet namespace: its one record is the oldest, so nothing of it
	// lies after its follower's cursor.
	quiet, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "quiet", Name: "q"}, Owner: "w",
		TTL: 30 * time.Second, RequestID: "q"})
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
	// a1.0 is a position (audit.Tail's of an empty trail), not the start:
	// a follower there has read none of the records the prune removed.
	zero := audit.Query{Follow: true, Cursor: audit.EncodeCursor(0)}
	_, err = b.ReadAudit(ctx, zero)
	wantPruned(t, "follower of the whole trail at "+zero.Cursor, audit.Page{}, err)

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
		{Follow: true},
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
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k" + string(rune('0'+i))), Owner: "w", TTL: time.Second,
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
	clock := newClock()
	b, err := sqlite.Open(t.Context(), migratedFile(t), sqlite.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	followprune.Run(t, followprune.Store{Backend: b, Tick: func() { clock.Advance(time.Second) }, Now: clock.Now})
}
