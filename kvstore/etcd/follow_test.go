package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// followRig is a private 3-member cluster (tests that kill members or
// compact cannot share one) with a follower of the whole trail of prefix
// /follow served by member 0 only, so that losing members 1 and 2 leaves
// its watch without a leader, and a runtime that writes through every
// member.
type followRig struct {
	t     *testing.T
	ctx   context.Context
	c     *etcdcluster.Cluster
	b     *etcd.Backend // the follower's
	rt    *protocol.Runtime
	items chan followItem
	ended chan struct{} // closed when the follower's stream ended
}

// followItem is one thing a follower yielded.
type followItem struct {
	rec audit.Record
	err error
}

// startFollowRig starts the rig's cluster and follower; setup, when not
// nil, is called on the follower's backend before it follows.
func startFollowRig(t *testing.T, setup func(*etcd.Backend)) *followRig {
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints()[:1], Prefix: "/follow"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	if setup != nil {
		setup(b)
	}
	writer, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/follow"})
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(writer, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	r := &followRig{t: t, ctx: ctx, c: c, b: b, rt: rt, items: make(chan followItem), ended: make(chan struct{})}
	fctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		defer close(r.ended)
		for rec, err := range b.Follow(fctx, audit.Query{}) {
			select {
			case r.items <- followItem{rec, err}:
			case <-fctx.Done():
				return
			}
		}
	}()
	return r
}

// next is what the follower yields next; the test fails when its stream
// ended or nothing came in 30s.
func (r *followRig) next(what string) followItem {
	r.t.Helper()
	select {
	case it := <-r.items:
		return it
	case <-r.ended:
		r.t.Fatalf("%s: the follower ended", what)
	case <-time.After(30 * time.Second):
		r.t.Fatalf("%s: nothing from the follower in 30s", what)
	}
	return followItem{}
}

// acquire acquires name through the runtime and returns the token: the
// id of its record.
func (r *followRig) acquire(name string) int64 {
	r.t.Helper()
	actx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	res, err := r.rt.Acquire(actx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute})
	if err != nil || res.Status != protocol.StatusAcquired {
		r.t.Fatalf("acquire %s: %v", name, err)
	}
	return res.Lease.Token
}

// outage kills members 1 and 2, waits for the follower to report the
// loss as unavailable, and brings the members back.
func (r *followRig) outage() {
	r.t.Helper()
	r.c.Kill(1)
	r.c.Kill(2)
	if it := r.next("quorum loss"); !errors.Is(it.err, protocol.ErrUnavailable) {
		r.t.Fatalf("during the quorum loss the follower gave %+v %v, want an unavailable error", it.rec, it.err)
	}
	for _, i := range []int{1, 2} {
		if err := r.c.Restart(i); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.c.WaitHealthy(r.ctx); err != nil {
		r.t.Fatal(err)
	}
}

// after waits past the failures of the outage for the follower's next
// record, which must be tok's: none missed, none twice. An error matching
// ErrCompacted fails the test at once (the stream ends with it).
func (r *followRig) after(tok int64) {
	r.t.Helper()
	for {
		it := r.next("after the outage")
		if errors.Is(it.err, etcd.ErrCompacted) {
			r.t.Fatalf("after the outage the follower lost its place: %v", it.err)
		}
		if it.err != nil {
			continue // failures while the member found the new leader
		}
		if it.rec.ID != tok {
			r.t.Fatalf("after the outage the follower gave record %d (%s %s), want the new one %d", it.rec.ID, it.rec.Op, it.rec.Key, tok)
		}
		return
	}
}

// TestFollowRidesOutQuorumLoss: a follower whose watch the cluster ends
// (its member lost the leader: two of three members down) yields the
// failure and goes on once the cluster is back, from where it was: the
// record written after the outage reaches it, and no record twice. It
// used to end the stream at the failure (`leasectl audit --follow` then
// exited 0). After Close, the stream ends with closed.
func TestFollowRidesOutQuorumLoss(t *testing.T) {
	r := startFollowRig(t, nil)
	// The first record comes through the watch once the catch-up read
	// found nothing; the second proves the watch is live.
	for _, name := range []string{"before-1", "before-2"} {
		tok := r.acquire(name)
		if it := r.next(name); it.err != nil || it.rec.ID != tok {
			t.Fatalf("%s: follower gave %+v %v, want the record %d", name, it.rec, it.err, tok)
		}
	}
	r.outage()
	r.after(r.acquire("after"))
	_ = r.b.Close(context.Background())
	for {
		it := r.next("after Close")
		if errors.Is(it.err, protocol.ErrClosed) {
			break
		}
		if it.err == nil {
			t.Fatalf("after Close the follower gave record %d", it.rec.ID)
		}
	}
	select {
	case <-r.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not end after Close")
	}
}

// TestFollowEndsOnACredentialsRefusal: a follower whose credentials the
// cluster refuses after its first read (its role's read permission on
// the prefix revoked, or its user's password changed, while it follows)
// yields the refusal once, matching protocol.ErrForbidden or
// protocol.ErrUnauthenticated, and its stream ends, as it does when the
// first read is refused and as audit.Watch does on the SQL stores: no
// retry mends it (`leasectl audit --follow` exits 7). It used to yield
// the refusal and watch again, every 2s at last, forever. etcd checks a
// watch's permission only when the watch is made, so the member restarts:
// the followers' watches are made again, as after a leader change. (A
// one-member cluster of the test's own, with authentication on.)
func TestFollowEndsOnACredentialsRefusal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := startAuthCluster(t, "rootpw")
	host := strings.TrimPrefix(c.Members[0].ClientURL, "http://")
	root := rootClient(t, host, "rootpw")
	const prefix = "/followauth/"
	for _, name := range []string{"revoked", "moved"} {
		addUser(t, root, name, clientv3.PermissionType(clientv3.PermRead), prefix)
	}
	rt := protocol.New(openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: "root", Password: "rootpw"}), nil)
	acquire := func(name string) int64 {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := rt.Acquire(actx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire %s: %v", name, err)
		}
		return res.Lease.Token
	}
	first := acquire("first")

	// follow starts user's follower; its items arrive on the channel,
	// closed when the stream ends.
	follow := func(user string) <-chan followItem {
		b := openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: user, Password: user + "pw"})
		items := make(chan followItem, 100)
		fctx, stop := context.WithCancel(ctx)
		t.Cleanup(stop)
		go func() {
			defer close(items)
			for rec, err := range b.Follow(fctx, audit.Query{}) {
				select {
				case items <- followItem{rec, err}:
				case <-fctx.Done():
					return
				}
			}
		}()
		select {
		case it := <-items:
			if it.err != nil || it.rec.ID != first {
				t.Fatalf("%s's follower gave %+v %v first, want the record %d", user, it.rec, it.err, first)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s's follower gave nothing in 30s", user)
		}
		return items
	}
	revoked, moved := follow("revoked"), follow("moved")

	if _, err := root.RoleRevokePermission(ctx, "revoked", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserChangePassword(ctx, "moved", "otherpw"); err != nil {
		t.Fatal(err)
	}
	c.Kill(0)
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	// Back once it serves root a linearizable read (WaitHealthy's
	// client has no user).
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := root.Get(gctx, prefix)
		cancel()
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the member did not serve root 30s after its restart: %v", err)
		}
	}
	acquire("after")
	for _, f := range []struct {
		user  string
		items <-chan followItem
		want  error
	}{{"revoked", revoked, protocol.ErrForbidden}, {"moved", moved, protocol.ErrUnauthenticated}} {
		// Failures while the member was down may come first; the
		// refusal comes once the watch is made again, and ends the
		// stream at once.
		var refusals, others []error
		deadline := time.After(5 * time.Second)
	drain:
		for {
			select {
			case it, open := <-f.items:
				if !open {
					break drain
				}
				if it.err == nil {
					t.Errorf("%s's follower gave record %d (%s %s) after its credentials were refused", f.user, it.rec.ID, it.rec.Op, it.rec.Key)
				} else if protocol.CredentialsRefused(it.err) {
					refusals = append(refusals, it.err)
				} else {
					others = append(others, it.err)
				}
			case <-deadline:
				t.Errorf("%s's follower still followed 5s after the member was back and a record was written; it yielded the refusals %v and the other failures %v",
					f.user, refusals, others)
				break drain
			}
		}
		if len(refusals) != 1 || !errors.Is(refusals[0], f.want) {
			t.Errorf("%s's follower yielded the refusals %v; want one, matching %v", f.user, refusals, f.want)
		}
	}
}

// TestFollowKeepsItsPlaceOnAQuietTrail: a follower whose trail is quiet
// while the cluster writes other keys and compacts their history (as
// etcd's auto-compaction does) still goes on after a quorum loss: it
// watches again from a revision after the compaction, having moved its
// place to each progress report of its watch. It used to watch again
// from the revision after the last record it saw, compacted by then, and
// its stream ended with ErrCompacted.
func TestFollowKeepsItsPlaceOnAQuietTrail(t *testing.T) {
	r := startFollowRig(t, func(b *etcd.Backend) { etcd.SetFollowProgress(b, 100*time.Millisecond) })
	tok := r.acquire("before")
	if it := r.next("before"); it.err != nil || it.rec.ID != tok {
		t.Fatalf("before: follower gave %+v %v, want the record %d", it.rec, it.err, tok)
	}
	cli, err := r.c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var head int64
	for i := range 20 {
		put, err := cli.Put(r.ctx, fmt.Sprint("/elsewhere/", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		head = put.Header.Revision
	}
	if _, err := cli.Compact(r.ctx, head); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // ten progress reports
	r.outage()
	r.after(r.acquire("after"))
}
