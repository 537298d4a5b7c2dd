package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowEndsWhenTheStoreIsDestroyed: a follower of the trail ends,
// as soon as Destroy (`leasectl migrate down --destroy-data`) deletes it,
// with one error matching etcd.ErrNoStore (status unavailable), and
// reports no tampering, also when Destroy deletes the records in several
// transactions (another client's keys lie between them) and the store's
// own keys sort on both sides of its mark (a prune's record and mark).
// Destroy's mark is gone afterwards: only the other client's keys stay.
func TestFollowEndsWhenTheStoreIsDestroyed(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	ctx := t.Context()
	p := b.Prefix()
	var notes []string
	for i := range 120 {
		ns := fmt.Sprintf("n%03d", i)
		if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: "k"}, Owner: "o", TTL: time.Minute, RequestID: "r"}); err != nil {
			t.Fatal(err)
		}
		note := p + "a/" + ns + "note" // no record: sorts between n000's records and n001's
		if _, err := b.Client().Put(ctx, note, "not leasestore's"); err != nil {
			t.Fatal(err)
		}
		notes = append(notes, note)
	}
	// A prune's record (namespace "") and mark: the store's own keys
	// then sort on both sides of Destroy's mark.
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now().Add(-time.Hour), Actor: "op", RequestID: "prune"}); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	type end struct {
		errs  []error
		early bool // ended before its context
	}
	ended := make(chan end, 1)
	started := make(chan struct{})
	etcd.SetAfterRead(b, func() { close(started) })
	go func() {
		var got []error
		for _, err := range b.Follow(fctx, audit.Query{}) {
			if err != nil {
				got = append(got, err)
			}
		}
		ended <- end{got, fctx.Err() == nil}
	}()
	<-started
	time.Sleep(300 * time.Millisecond) // the watch is made
	if _, err := open(t, &etcd.Config{Prefix: prefix}).Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	e := <-ended
	for _, err := range e.errs {
		if errors.Is(err, etcd.ErrTampered) {
			t.Errorf("the follower reported Destroy's deletions as tampering: %v", err)
		}
	}
	if !e.early || len(e.errs) != 1 || !errors.Is(e.errs[0], etcd.ErrNoStore) || !errors.Is(e.errs[0], protocol.ErrUnavailable) {
		t.Errorf("the follower ended early: %v, with %d errors %v; want it ended at once by one unavailable error matching ErrNoStore",
			e.early, len(e.errs), e.errs)
	}
	left, err := b.Client().Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range left.Kvs {
		got = append(got, string(kv.Key))
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", notes) {
		t.Errorf("after Destroy the prefix holds %d keys, the first %q; want only the %d other keys", len(got), got[:min(len(got), 3)], len(notes))
	}
}
