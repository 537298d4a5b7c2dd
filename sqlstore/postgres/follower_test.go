package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// followerRecordsEnv overrides how many records TestFollowerMissesNothing
// writes (default followerRecords). A follower that read past writers in
// progress (the trail before followers read below the horizon) missed
// 14-22 of 2,000 records in each of three runs, 33-46 of 5,000 and 87 of
// 20,000; the default leaves a wide margin at a fifth of the 100,000
// records it wrote before.
const (
	followerRecordsEnv = "LEASESTORE_FOLLOWER_RECORDS"
	followerRecords    = 20_000
)

// writeCycles runs acquire+release cycles on random keys of ns from
// writers goroutines spread over the backends until n records were
// written (each cycle writes two), and returns how many it wrote.
func writeCycles(t *testing.T, backends []*postgres.Backend, writers, n int, ns string) int64 {
	t.Helper()
	var (
		written atomic.Int64
		wg      sync.WaitGroup
		failed  atomic.Bool
	)
	for w := range writers {
		b := backends[w%len(backends)]
		wg.Go(func() {
			for i := 0; written.Load() < int64(n) && !failed.Load(); i++ {
				k := protocol.Key{Namespace: ns, Name: fmt.Sprintf("k%d", rand.N(1000))}
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: fmt.Sprintf("w%d", w), TTL: time.Minute,
					RequestID: fmt.Sprintf("a-%d-%d", w, i)})
				if err == nil && res.Status == protocol.StatusAcquired {
					written.Add(1)
					res, err = b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: res.Lease.Owner, Token: res.Lease.Token,
						RequestID: fmt.Sprintf("r-%d-%d", w, i)})
					if err == nil && res.Status == protocol.StatusReleased {
						written.Add(1)
					}
				}
				cancel()
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return written.Load()
}

// follow pages through the trail of ns as a follower (audit.Query.Follow)
// until stop is closed and a read after that came back empty and not held
// back, or a minute after stop (transactions of other tests on the shared
// server can hold the horizon back for a while), and returns the ids it
// saw, in order. Ids must increase.
func follow(t *testing.T, r audit.Reader, ns string, stop <-chan struct{}) []int64 {
	t.Helper()
	var (
		ids      []int64
		cursor   string
		giveUpAt time.Time
	)
	for {
		stopped := false
		select {
		case <-stop:
			stopped = true
			if giveUpAt.IsZero() {
				giveUpAt = time.Now().Add(time.Minute)
			}
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		p, err := r.ReadAudit(ctx, audit.Query{Namespace: ns, Follow: true, Cursor: cursor, Limit: audit.MaxLimit})
		cancel()
		if err != nil {
			t.Errorf("follower: %v", err)
			return ids
		}
		for _, rec := range p.Records {
			if len(ids) > 0 && rec.ID <= ids[len(ids)-1] {
				t.Errorf("follower: id %d after %d", rec.ID, ids[len(ids)-1])
				return ids
			}
			ids = append(ids, rec.ID)
			cursor = audit.EncodeCursor(rec.ID)
		}
		if stopped && len(p.Records) == 0 && (!p.HeldBack || time.Now().After(giveUpAt)) {
			if p.HeldBack {
				t.Logf("follower: still held back a minute after the writers stopped")
			}
			return ids
		}
		if len(p.Records) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// readAll pages through the trail of ns with plain reads.
func readAll(t *testing.T, r audit.Reader, ns string) []int64 {
	t.Helper()
	var (
		ids    []int64
		cursor string
	)
	for {
		p, err := r.ReadAudit(ctxT(t), audit.Query{Namespace: ns, Cursor: cursor, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p.Records {
			ids = append(ids, rec.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		cursor = p.NextCursor
	}
}

// missing returns the ids of want that got lacks (both ascending).
func missing(want, got []int64) []int64 {
	var out []int64
	j := 0
	for _, id := range want {
		for j < len(got) && got[j] < id {
			j++
		}
		if j == len(got) || got[j] != id {
			out = append(out, id)
		}
	}
	return out
}

// TestFollowerMissesNothing: a follower paging by cursor while 8 writers
// commit, and a bystander session holds 1,500 advisory locks (which once
// widened a race in the follower's read), sees every record the trail
// holds afterwards, in id order.
func TestFollowerMissesNothing(t *testing.T) {
	t.Parallel()
	n := followerRecords
	if v, err := strconv.Atoi(os.Getenv(followerRecordsEnv)); err == nil && v > 0 {
		n = v
	}
	dsn := pgtest.MigratedDSN(t)
	backends := []*postgres.Backend{openBackend(t, dsn, &postgres.Config{MaxConns: 4}),
		openBackend(t, dsn, &postgres.Config{MaxConns: 4})}
	bystander := rawConn(t, dsn)
	// Locks of a class of its own, so that concurrent runs do not wait on
	// each other.
	mustExec(t, bystander, "SELECT pg_advisory_lock($1, i) FROM generate_series(1, 1500) AS i", rand.Int32())

	stop := make(chan struct{})
	var followed []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		followed = follow(t, backends[0], "", stop)
	}()
	began := time.Now()
	written := writeCycles(t, backends, 8, n, "ns")
	close(stop)
	<-done
	all := readAll(t, backends[1], "")
	if int64(len(all)) != written {
		t.Fatalf("the trail holds %d records, the writers reported %d", len(all), written)
	}
	if lost := missing(all, followed); len(lost) > 0 {
		t.Fatalf("the follower missed %d of %d records, first %v", len(lost), len(all), lost[:min(len(lost), 10)])
	}
	t.Logf("the follower saw all %d records, written by 8 writers in %v", len(all), time.Since(began).Round(time.Millisecond))
}

// TestSinceReadsStartNearTheirTime: a read of the records since T starts
// its scan near T (sinceStartSQL), and still returns every record at or
// after T, those whose time lags their place in the trail (a statement that
// waited before it wrote) included, and none before.
func TestSinceReadsStartNearTheirTime(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	raw := rawPool(t, dsn)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// 20,000 records a second apart, ids in step, except that every 97th
	// record's time lags its place by 20 seconds.
	mustExec(t, raw, `
		INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		                              status, version, params_hash)
		SELECT i, $1::timestamptz + (i * interval '1 second') - CASE WHEN i % 97 = 0 THEN interval '20 seconds' ELSE interval '0' END,
		       'renew', 'ns', 'k', 'w', i, 'r' || i, 'w', '', 'renewed', 1, 'x'
		FROM generate_series(1, 20000) AS i`, base)
	b := openBackend(t, dsn, nil)
	for _, cut := range []int{0, 1, 500, 9713, 9715, 19990, 20001} {
		since := base.Add(time.Duration(cut) * time.Second)
		var want []int64
		for i := int64(1); i <= 20000; i++ {
			at := base.Add(time.Duration(i) * time.Second)
			if i%97 == 0 {
				at = at.Add(-20 * time.Second)
			}
			if !at.Before(since) {
				want = append(want, i)
			}
		}
		var got []int64
		q := audit.Query{Namespace: "ns", Since: since, Limit: audit.MaxLimit}
		for {
			p, err := b.ReadAudit(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Records {
				got = append(got, r.ID)
			}
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("since +%ds: %d records (first %v), want %d (first %v)", cut, len(got), got[:min(3, len(got))],
				len(want), want[:min(3, len(want))])
		}
	}
}
