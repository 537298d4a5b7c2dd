package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// getSpy is a Store (and, through the embedded runtime, a Notifier) that
// tells each Get that returned: the confirming reads of WatchLease.
type getSpy struct {
	*protocol.Runtime
	gets chan struct{}
}

func (s getSpy) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	res, err := s.Runtime.Get(ctx, req)
	select {
	case s.gets <- struct{}{}:
	default:
	}
	return res, err
}

// rev61: one failed read of the cross-process poller (here: the audit
// table briefly missing; in the field any error of its two queries) ends
// the poller and signals the waiters once; no poller starts again until the
// next Subscribe. A holder subscribed before it never hears a revoke made
// through another Backend on the file afterwards: it learns of it at its
// next renewal (20 s here), not "at once" (docs/holding.md).
func TestRev61HoldHearsRevokeAfterAPollerError(t *testing.T) {
	path := migratedFile(t)
	holder := protocol.New(open(t, path, nil), nil)
	other := protocol.New(open(t, path, nil), nil)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spy := getSpy{Runtime: holder, gets: make(chan struct{}, 1)}
	k := key("rev61")
	h, err := protocol.Hold(ctxT(t), spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the first confirming get, once the subscription is live
	case <-spy.gets:
	case <-time.After(5 * time.Second):
		t.Fatal("no get after the subscription")
	}
	if _, err := db.Exec(`ALTER TABLE leasestore_audit RENAME TO leasestore_audit_rev61`); err != nil {
		t.Fatal(err)
	}
	select { // the poller failed and signalled everyone: the holder reads the key, still held
	case <-spy.gets:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller's failure signalled nobody")
	}
	if _, err := db.Exec(`ALTER TABLE leasestore_audit_rev61 RENAME TO leasestore_audit`); err != nil {
		t.Fatal(err)
	}
	if h.Context().Err() != nil {
		t.Fatalf("lost before the revoke: %v", context.Cause(h.Context()))
	}
	revoked := time.Now()
	if _, err := other.Revoke(ctxT(t), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "rev61"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
		t.Logf("heard after %v: %v", time.Since(revoked), context.Cause(h.Context()))
	case <-time.After(5 * time.Second):
		t.Fatalf("revoke through another Backend %v ago: the holder has not heard of it (renewals every 20s)",
			time.Since(revoked).Round(time.Millisecond))
	}
}
