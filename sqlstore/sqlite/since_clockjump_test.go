package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestSinceReadAfterTheClockWentBackMissesNoRecord steps the backend's
// clock back an hour (an NTP step, a VM restored on another host; or two
// processes on one file whose clocks disagree by that much) and then
// reads the records since a time the records written before the step are
// at or after: a read since T must return every record at or after T,
// whatever the clock did between them, oldest first and newest first.
func TestSinceReadAfterTheClockWentBackMissesNoRecord(t *testing.T) {
	t.Parallel()
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	since := writeAcrossAStepBack(t, b, clock)
	wantOnlyLate(t, b, since)
}

// A trail written across a step back before schema 12 (the steps of
// which migration 12 reads from the trail), or again after migrate down
// past 12 and up: the read since T misses no record either.
func TestSinceReadMissesNoRecordOfAStepBackBeforeSchema12(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := newClock()
	path := migratedFile(t)
	b := open(t, path, clock)
	since := writeAcrossAStepBack(t, b, clock)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	var steps int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name IN
		('leasestore_audit_steps', 'leasestore_audit_step', 'leasestore_leases_set_aside')`).Scan(&steps); err != nil || steps != 0 {
		t.Fatalf("objects of schema 12 after migrate down: %d, %v; want none", steps, err)
	}
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	wantOnlyLate(t, open(t, path, clock), since)
}

// writeAcrossAStepBack writes 4 records an hour before the clock's time
// t0, one ("late") an hour after it, and then, the clock stepped back an
// hour, 40 at t0; it returns t0 + 30 minutes, a time only "late" is at or
// after.
func writeAcrossAStepBack(t *testing.T, b *sqlite.Backend, clock *testClock) time.Time {
	t.Helper()
	ctx := ctxT(t)
	t0 := clock.Now()
	clock.Advance(-time.Hour)
	cycle := func(name string, n int) {
		t.Helper()
		for i := range n {
			rid := fmt.Sprintf("%s-%d", name, i)
			got, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: rid + "-a"})
			wantStatus(t, "acquire "+rid, got, err, protocol.StatusAcquired)
			rel, err := b.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: "o", Token: got.Lease.Token, RequestID: rid + "-r"})
			wantStatus(t, "release "+rid, rel, err, protocol.StatusReleased)
		}
	}
	cycle("before", 2) // 4 records an hour before t0
	clock.Advance(2 * time.Hour)
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("late"), Owner: "o", TTL: time.Minute, RequestID: "late"})
	wantStatus(t, "acquire late", held, err, protocol.StatusAcquired) // 1 record an hour after t0
	// The clock steps back an hour: 40 records at t0.
	clock.Advance(-time.Hour)
	cycle("after", 20)
	return t0.Add(30 * time.Minute)
}

// wantOnlyLate reads the records since since, oldest first and newest
// first, and fails unless they are exactly the one of "late".
func wantOnlyLate(t *testing.T, b *sqlite.Backend, since time.Time) {
	t.Helper()
	ctx := ctxT(t)
	for _, newest := range []bool{false, true} {
		var got []string
		q := audit.Query{Namespace: "ns", Since: since, Limit: audit.MaxLimit, Newest: newest}
		for {
			p, err := b.ReadAudit(ctx, q)
			if err != nil {
				t.Fatalf("read since %v: %v", since, err)
			}
			for _, r := range p.Records {
				got = append(got, r.RequestID)
			}
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		if want := "[late]"; fmt.Sprint(got) != want {
			t.Errorf("read since %s (newest first: %v) after the clock went back an hour: records %v, want %s (the acquire recorded an hour after the step's end)",
				since.Format(time.TimeOnly), newest, got, want)
		}
	}
}
