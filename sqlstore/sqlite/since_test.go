package sqlite_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A read of the records since a time starts where they begin, found by a
// binary search over ids, not at the start of the trail: on a trail of
// 10,000 records a second apart, the read starts after the newest record
// older than the time minus sinceSlack, and returns exactly the records at
// or after the time, oldest first (through pages) and newest first.
func TestReadsByTimeStartWhereTheRecordsBegin(t *testing.T) {
	t.Parallel()
	const n = 10_000
	path := migratedFile(t)
	b := open(t, path, nil)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Record i (ids 1..n) at base + i seconds.
	if _, err := rawDB(t, path).ExecContext(ctxT(t), fmt.Sprintf(`
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, status, version, params_hash)
SELECT i, ?1 + i * 1000000, 'acquire', 'ns', 'k' || (i %% 7), 'o', i, 'r' || i, 'o', 'acquired', ?2, '' FROM c`, n),
		base.UnixMicro(), audit.RecordFormatVersion); err != nil {
		t.Fatal(err)
	}
	at := func(i int64) time.Time { return base.Add(time.Duration(i) * time.Second) }
	since := at(5000)

	start, err := b.SinceStart(ctxT(t), since)
	if err != nil {
		t.Fatal(err)
	}
	if want := 5000 - int64(sqlite.SinceSlack/time.Second) - 1; start != want {
		t.Fatalf("a read since record 5000's time starts after id %d, want %d (the newest record older than the time minus %v)",
			start, want, sqlite.SinceSlack)
	}
	for _, s := range []time.Time{at(0), at(1)} {
		if start, err := b.SinceStart(ctxT(t), s); err != nil || start != 0 {
			t.Fatalf("a read since %v (no record older than it minus the slack) starts after id %d, %v; want 0", s, start, err)
		}
	}

	var want []int64
	for i := int64(5000); i <= n; i++ {
		want = append(want, i)
	}
	if got := readAll(t, b, audit.Query{Since: since, Limit: 700}); !slices.Equal(got, want) {
		t.Fatalf("records since record 5000's time, oldest first: %d records from %v, want the %d from 5000 to %d",
			len(got), got[:min(3, len(got))], len(want), n)
	}
	slices.Reverse(want)
	if got := readAll(t, b, audit.Query{Since: since, Newest: true, Limit: 700}); !slices.Equal(got, want) {
		t.Fatalf("records since record 5000's time, newest first: %d records from %v, want the %d from %d to 5000",
			len(got), got[:min(3, len(got))], len(want), n)
	}
}

// readAll returns the ids of every record q selects, page after page.
func readAll(t *testing.T, b *sqlite.Backend, q audit.Query) []int64 {
	t.Helper()
	var ids []int64
	for {
		p, err := b.ReadAudit(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			ids = append(ids, r.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		q.Cursor = p.NextCursor
	}
}
