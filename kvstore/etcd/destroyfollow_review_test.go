package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowDoesNotCallDestroyTampering: `leasectl migrate down
// --destroy-data` (Destroy) is leasestore's own, documented way to remove
// a store, its trail included. A follower of the trail (`leasectl audit
// --follow` feeding a security log) must not report each record it
// removes as tampering ("the audit trail was altered outside
// leasestore", ErrTampered): that is a false alarm for every record of
// the trail. Destroy marks no revision as its own, so the follower
// cannot tell its deletions from an intruder's.
func TestFollowDoesNotCallDestroyTampering(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := open(t, &etcd.Config{Prefix: prefix})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	for i := range 3 {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint(i)), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil || len(p.Records) != 3 {
		t.Fatalf("trail: %+v %v", p, err)
	}
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	errs := make(chan []error, 1)
	go func() {
		var got []error
		for _, err := range b.Follow(fctx, audit.Query{Cursor: audit.EncodeCursor(p.Records[2].ID)}) {
			if err != nil {
				got = append(got, err)
			}
		}
		errs <- got
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := open(t, &etcd.Config{Prefix: prefix}).Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	var tampered []error
	for _, err := range <-errs {
		if errors.Is(err, etcd.ErrTampered) {
			tampered = append(tampered, err)
		}
	}
	if len(tampered) > 0 {
		t.Fatalf("a follower reported leasestore's own Destroy (migrate down --destroy-data) as tampering, %d times, the first: %v",
			len(tampered), tampered[0])
	}
}
