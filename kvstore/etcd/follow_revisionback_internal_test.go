package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowEndsWhenTheRevisionWentBack: once the Backend saw its
// cluster's revision go back (a snapshot restored without
// --bump-revision, another cluster at the same addresses), it refuses
// every operation until the process restarts, an error matching
// protocol.ErrRestartRequired. Its follower ends on it, as audit.Watch
// over any reader does, rather than go on streaming the watch of a cluster
// whose tokens and records it can no longer trust (it yielded the next
// record and followed for ever: its watch does not pass through the
// revision guard).
func TestFollowEndsWhenTheRevisionWentBack(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	ctx := context.Background()
	open := func() *Backend {
		b, err := Open(ctx, &Config{Endpoints: c.Endpoints(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}
	follower, writer := open(), open()
	acquire := func(name string) {
		t.Helper()
		if _, err := writer.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: name}, Owner: "w",
			TTL: time.Minute, RequestID: name}); err != nil {
			t.Fatal(err)
		}
	}
	acquire("before")

	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	read := make(chan struct{})
	follower.testAfterRead = func() { close(read) }
	items := make(chan followed, 16)
	go func() {
		defer close(items)
		for rec, err := range follower.Follow(fctx, audit.Query{Namespace: "ns"}) {
			items <- followed{rec, err}
		}
	}()
	<-read
	// What the guard records when an answer's revision went back.
	follower.kv.guard.mu.Lock()
	follower.kv.guard.back = &errRevisionBack{was: follower.kv.guard.seen + 1000, now: follower.kv.guard.seen}
	follower.kv.guard.mu.Unlock()
	acquire("after")

	var got []followed
	for it := range items {
		got = append(got, it)
		if it.err != nil && errors.Is(it.err, protocol.ErrRestartRequired) {
			break
		}
	}
	if fctx.Err() != nil {
		t.Fatalf("the follower of a Backend whose cluster's revision went back followed on until its context ended "+
			"(%d items, the last record %q); want it to end with an error matching protocol.ErrRestartRequired", len(got), lastKey(got))
	}
	for _, it := range got {
		if it.err == nil && it.rec.Key == "after" {
			t.Errorf("the follower yielded the record of %q, written after the revision went back", it.rec.Key)
		}
	}
	if _, ok := <-items; ok {
		t.Errorf("the follower went on after yielding the error matching protocol.ErrRestartRequired")
	}
}

// followed is one yield of a follower.
type followed struct {
	rec audit.Record
	err error
}

// lastKey is the key of the last record among items ("" for none).
func lastKey(items []followed) string {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].err == nil {
			return items[i].rec.Key
		}
	}
	return ""
}
