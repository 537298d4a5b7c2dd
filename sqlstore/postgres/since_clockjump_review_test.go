package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestSinceReadAfterTheServerClockWentBackMissesNoRecord steps the store's
// clock back an hour (an NTP step, a VM restored on another host: the
// server's clock is the store's, and nothing keeps it from going back)
// and then reads the records since a time the records written before the
// step are at or after: a read since T must return every record at or
// after T, whatever the clock did between them. Records are written
// through the backend, so each one's time is the clock's as the backend
// records it.
func TestSinceReadAfterTheServerClockWentBackMissesNoRecord(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64
	set := func(at time.Time) { now.Store(at.UnixNano()) }
	set(t0.Add(-time.Hour))
	b := openBackend(t, pgtest.MigratedDSN(t), postgres.WithTestClock(nil, func() time.Time { return time.Unix(0, now.Load()).UTC() }))
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
	set(t0.Add(time.Hour))
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("late"), Owner: "o", TTL: time.Minute, RequestID: "late"})
	wantStatus(t, "acquire late", held, err, protocol.StatusAcquired) // 1 record an hour after t0
	// The clock steps back an hour: 40 records at t0.
	set(t0)
	cycle("after", 20)
	since := t0.Add(30 * time.Minute)
	var got []string
	q := audit.Query{Namespace: "ns", Since: since, Limit: audit.MaxLimit}
	for {
		p, err := b.ReadAudit(ctx, q)
		if err != nil {
			t.Fatalf("read since %v: %v", since, err)
		}
		for _, r := range p.Records {
			got = append(got, fmt.Sprintf("%s@%s", r.RequestID, r.At.Format(time.TimeOnly)))
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if want := "[late@13:00:00]"; fmt.Sprint(got) != want {
		t.Fatalf("read since %s after the clock went back an hour: records %v, want %s (the acquire recorded at %s)",
			since.Format(time.TimeOnly), got, want, held.Lease.AcquiredAt.Format(time.TimeOnly))
	}
}
