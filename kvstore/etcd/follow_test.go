package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// collect runs f as a follower until it yielded n items (records or
// errors) or 10s passed.
func collect(ctx context.Context, b *etcd.Backend, q audit.Query, n int) (recs []audit.Record, errs []error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for rec, err := range b.Follow(ctx, q) {
		if err != nil {
			errs = append(errs, err)
		} else {
			recs = append(recs, rec)
		}
		if len(recs)+len(errs) == n {
			break
		}
	}
	return recs, errs
}

// TestFollowIsExact: a follower started before 4 writers sees each of
// their 200 records once, in id order, and the same as a read of the
// trail afterwards.
func TestFollowIsExact(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	ctx := t.Context()
	const writers, each = 4, 50
	got := make(chan []audit.Record)
	go func() {
		recs, errs := collect(ctx, b, audit.Query{}, writers*each)
		if len(errs) > 0 {
			t.Errorf("follower errors: %v", errs)
		}
		got <- recs
	}()
	time.Sleep(200 * time.Millisecond)
	done := make(chan struct{})
	for w := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			rt := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
			for i := range each {
				if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("w%d-%d", w, i)), Owner: "o", TTL: time.Minute}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range writers {
		<-done
	}
	recs := <-got
	var read []int64
	for q := (audit.Query{Limit: audit.MaxLimit}); ; {
		p, err := b.ReadAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			read = append(read, r.ID)
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	var followed []int64
	for _, r := range recs {
		followed = append(followed, r.ID)
	}
	if len(followed) != writers*each || !slices.IsSorted(followed) || !slices.Equal(followed, read) {
		t.Fatalf("followed %d records %v\nread %d %v", len(followed), followed, len(read), read)
	}
}

// TestFollowDetectsTampering: a record deleted or overwritten behind
// leasestore's back is reported to a follower (ErrTampered), a prune's
// deletions are not, and a read of a record whose checksum no longer
// matches fails naming the record.
func TestFollowDetectsTampering(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := range 3 {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint(i)), Owner: "o", TTL: time.Minute, RequestID: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil || len(p.Records) != 3 {
		t.Fatalf("trail: %+v %v", p, err)
	}
	results := make(chan []error, 1)
	go func() {
		_, errs := collect(ctx, b, audit.Query{Cursor: audit.EncodeCursor(p.Records[2].ID)}, 3) // prune record + 2 errors
		results <- errs
	}()
	time.Sleep(300 * time.Millisecond)
	// A prune: its deletion is no tampering.
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: p.Records[0].At.Add(time.Microsecond), Actor: "ops", RequestID: "prune-1"}); err != nil {
		t.Fatal(err)
	}
	// A deletion and an edit behind leasestore's back.
	if _, err := cli.Delete(ctx, b.Prefix()+"a/ns\x00r1"); err != nil {
		t.Fatal(err)
	}
	g, err := cli.Get(ctx, b.Prefix()+"a/ns\x00r2")
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("record r2: %v %v", g, err)
	}
	edited := []byte(string(g.Kvs[0].Value))
	for i := range len(edited) - 3 {
		if string(edited[i:i+3]) == `"o"` {
			copy(edited[i:], `"x"`)
			break
		}
	}
	if _, err := cli.Put(ctx, string(g.Kvs[0].Key), string(edited)); err != nil {
		t.Fatal(err)
	}
	errs := <-results
	if len(errs) != 2 || !errors.Is(errs[0], etcd.ErrTampered) || !errors.Is(errs[1], etcd.ErrTampered) {
		t.Fatalf("follower errors %v, want two matching ErrTampered (the deletion, the overwrite)", errs)
	}
	if _, err := b.ReadAudit(ctx, audit.Query{}); !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "checksum") {
		t.Fatalf("read of an edited record: %v, want unavailable naming the checksum", err)
	}
}

// TestFollowBehindCompaction: a follower whose next revision was compacted
// away gets an error matching ErrCompacted, never a silent gap.
//
// Not parallel: it compacts the shared cluster, which cuts off every other
// test's watch from an older revision (TestFollowIsExact failed with
// "revision was compacted" when they ran together). Go runs it before any
// parallel test of the package starts.
func TestFollowBehindCompaction(t *testing.T) {
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	etcd.SetAfterRead(b, func() {
		// Writes and a compaction past them while the follower is between
		// its read and its watch.
		for i := range 3 {
			if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("x", i)), Owner: "o", TTL: time.Minute}); err != nil {
				t.Error(err)
			}
		}
		st, err := cli.Get(ctx, "compaction-probe")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := cli.Compact(ctx, st.Header.Revision); err != nil {
			t.Error(err)
		}
	})
	recs, errs := collect(ctx, b, audit.Query{Namespace: "ns"}, 2)
	if len(recs) != 1 || len(errs) != 1 || !errors.Is(errs[0], etcd.ErrCompacted) {
		t.Fatalf("follower behind a compaction: records %+v errors %v; want the first record, then ErrCompacted", recs, errs)
	}
}

// TestFollowRidesOutQuorumLoss: a follower whose watch the cluster ends
// (its member lost the leader: two of three members down) yields the
// failure and goes on once the cluster is back, from where it was: the
// record written after the outage reaches it, and no record twice. It
// used to end the stream at the failure (`leasectl audit --follow` then
// exited 0). After Close, the stream ends with closed.
func TestFollowRidesOutQuorumLoss(t *testing.T) {
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// Only member 0 serves the follower, so that losing 1 and 2 leaves it
	// without a leader.
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints()[:1], Prefix: "/follow"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	writer, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/follow"})
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(writer, nil)
	defer rt.Close(context.Background())
	type item struct {
		rec audit.Record
		err error
	}
	items := make(chan item)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for rec, err := range b.Follow(fctx, audit.Query{}) {
			select {
			case items <- item{rec, err}:
			case <-fctx.Done():
				return
			}
		}
	}()
	next := func(what string) item {
		t.Helper()
		select {
		case it := <-items:
			return it
		case <-ended:
			t.Fatalf("%s: the follower ended", what)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing from the follower in 30s", what)
		}
		return item{}
	}
	acquire := func(name string) int64 {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := rt.Acquire(actx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute})
		if err != nil || res.Status != protocol.StatusAcquired {
			t.Fatalf("acquire %s: %v", name, err)
		}
		return res.Lease.Token
	}
	// The first record comes through the watch once the catch-up read
	// found nothing; the second proves the watch is live.
	for _, name := range []string{"before-1", "before-2"} {
		tok := acquire(name)
		if it := next(name); it.err != nil || it.rec.ID != tok {
			t.Fatalf("%s: follower gave %+v %v, want the record %d", name, it.rec, it.err, tok)
		}
	}
	c.Kill(1)
	c.Kill(2)
	if it := next("quorum loss"); !errors.Is(it.err, protocol.ErrUnavailable) {
		t.Fatalf("during the quorum loss the follower gave %+v %v, want an unavailable error", it.rec, it.err)
	}
	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	tok := acquire("after")
	for {
		it := next("after the outage")
		if it.err != nil {
			continue // failures while the member found the new leader
		}
		if it.rec.ID != tok {
			t.Fatalf("after the outage the follower gave record %d (%s %s), want the new one %d", it.rec.ID, it.rec.Op, it.rec.Key, tok)
		}
		break
	}
	_ = b.Close(context.Background())
	for {
		it := next("after Close")
		if errors.Is(it.err, protocol.ErrClosed) {
			break
		}
		if it.err == nil {
			t.Fatalf("after Close the follower gave record %d", it.rec.ID)
		}
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not end after Close")
	}
}
