package brokenstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/brokenstore"
	"github.com/leasestore/leasestore/protocol"
)

// A broken store bends its one guarantee only: EarlyExpiry and
// UncommittedRelease judge a live lease, and leave the answers about a
// revoked lease whose lock-delay keeps the key to memstore (not_found).
func TestBendsOnlyLiveLeases(t *testing.T) {
	t.Parallel()
	for _, kind := range []brokenstore.Kind{brokenstore.EarlyExpiry, brokenstore.UncommittedRelease} {
		rt := protocol.New(brokenstore.New(kind, &brokenstore.Config{Every: 1, Skew: time.Hour}).Handle(), nil)
		defer rt.Close(context.Background())
		key := protocol.Key{Namespace: "ns", Name: "k"}
		res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute, LockDelay: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		tok := res.Lease.Token
		if _, err := rt.Revoke(t.Context(), protocol.RevokeRequest{Key: key, Actor: "op", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		renew, _ := rt.Renew(t.Context(), protocol.RenewRequest{Key: key, Owner: "w", Token: tok, TTL: time.Minute})
		release, _ := rt.Release(t.Context(), protocol.ReleaseRequest{Key: key, Owner: "w", Token: tok})
		if renew.Status != protocol.StatusNotFound || release.Status != protocol.StatusNotFound {
			t.Errorf("%s: the revoked holder's renew answered %s and release %s during the lock-delay, want not_found",
				kind, renew.Status, release.Status)
		}
	}
}
