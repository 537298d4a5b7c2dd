package etcd_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestRenewManyMemberFailsAlone: a batch renewal in which one member cannot
// be answered (its key's renewal entry is of a format this release does not
// read: unavailable for that key) still answers every other member by its
// own outcome, as the SQL backends do (protocol.BulkRenewer: "one lease's
// refusal never fails the others"; contract v3: each member fails alone).
// The etcd backend used to commit the other member's renewal and then
// answer it unavailable, with the batch's error, although it took effect.
func TestRenewManyMemberFailsAlone(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	good, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("good"), Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("bad"), Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The renewal entry of one key written by a later release.
	if _, err := cli.Put(ctx, b.Prefix()+"k/ns\x00bad\x00r", `{"v":2,"renewed_at":1,"expires_at":2,"ttl":3}`); err != nil {
		t.Fatal(err)
	}
	reqs := []protocol.RenewRequest{
		{Key: key("good"), Owner: "o", Token: good.Lease.Token, TTL: time.Minute, RequestID: "renew-good"},
		{Key: key("bad"), Owner: "o", Token: bad.Lease.Token, TTL: time.Minute, RequestID: "renew-bad"},
	}
	res, err := rt.RenewMany(ctx, reqs)
	// Whatever the batch answers, the good member's renewal committed:
	// its request id replays it.
	again, rerr := rt.Renew(ctx, reqs[0])
	if rerr != nil || again.Status != protocol.StatusRenewed || !again.Replayed {
		t.Fatalf("replay of the good member: %v %v, want renewed (replayed)", again.Status, rerr)
	}
	if len(res) != 2 || res[0].Status != protocol.StatusRenewed {
		st := protocol.Status("")
		if len(res) > 0 {
			st = res[0].Status
		}
		t.Fatalf("RenewMany answered the good member %q (batch error %v) although its renewal committed; want renewed, the bad member alone unavailable", st, err)
	}
	if res[1].Status != protocol.StatusUnavailable {
		t.Fatalf("bad member: %v, want unavailable", res[1].Status)
	}
}

// TestRenewManyKeyGoesOnAfterAFailure: when one renewal of a key cannot be
// answered (its request id's idempotency record is unreadable), the
// batch's later renewals of that key are still sent, in order, each with
// its own outcome, as if sent one after the other (protocol.BulkRenewer).
func TestRenewManyKeyGoesOnAfterAFailure(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	held, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("job"), Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The idempotency record of one request id, written by a later release.
	if _, err := cli.Put(ctx, b.Prefix()+"a/ns\x00renew-lost", `{"v":99}`); err != nil {
		t.Fatal(err)
	}
	reqs := []protocol.RenewRequest{
		{Key: key("job"), Owner: "o", Token: held.Lease.Token, TTL: time.Minute, RequestID: "renew-lost"},
		{Key: key("job"), Owner: "o", Token: held.Lease.Token, TTL: 2 * time.Minute, RequestID: "renew-next"},
	}
	res, err := rt.RenewMany(ctx, reqs)
	if err != nil || len(res) != 2 {
		t.Fatalf("RenewMany: %+v, %v; want one result per renewal and no error", res, err)
	}
	if res[0].Status != protocol.StatusUnavailable {
		t.Fatalf("the renewal with the unreadable record: %v (%s), want unavailable", res[0].Status, res[0].Message)
	}
	if res[1].Status != protocol.StatusRenewed || res[1].Replayed {
		t.Fatalf("the key's next renewal: %v (%s), want renewed (sent after the failed one)", res[1].Status, res[1].Message)
	}
}

// TestRenewManyFailsWholeWhenNoRenewalIsAnswered: when the cluster answers
// none of a batch's renewals, the backend's RenewMany fails as a whole
// with the first one's error, as PostgreSQL's statement does and as
// protocol.BulkRenewer says ("an error only when it could not answer at
// all"), so that a caller backing off on the error backs off here too.
// It used to answer every member unavailable with a nil error.
func TestRenewManyFailsWholeWhenNoRenewalIsAnswered(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	var reqs []protocol.RenewRequest
	for _, name := range []string{"a", "b"} {
		got, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, b.Prefix()+"k/ns\x00"+name+"\x00r", `{"v":2,"renewed_at":1,"expires_at":2,"ttl":3}`); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, protocol.RenewRequest{Key: key(name), Owner: "o", Token: got.Lease.Token, TTL: time.Minute,
			RequestID: "renew-" + name})
	}
	res, err := b.RenewMany(ctx, reqs)
	if err == nil || protocol.StatusOf(err) != protocol.StatusUnavailable || res != nil {
		t.Fatalf("RenewMany of two renewals the cluster could not answer: %d results, error %v; want no results and the first one's unavailable error", len(res), err)
	}
}
