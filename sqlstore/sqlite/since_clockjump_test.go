package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
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
	t0 := clock.Now()
	clock.Advance(-time.Hour)
	b := open(t, migratedFile(t), clock)
	ctx := ctxT(t)
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
	since := t0.Add(30 * time.Minute)
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
			t.Errorf("read since %s (newest first: %v) after the clock went back an hour: records %v, want %s (the acquire recorded at %s)",
				since.Format(time.TimeOnly), newest, got, want, held.Lease.AcquiredAt.Format(time.TimeOnly))
		}
	}
}
