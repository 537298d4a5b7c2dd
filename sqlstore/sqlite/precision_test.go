package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// A TTL or lock-delay finer than the microseconds the file stores: the
// acquire answers the lease as stored, so its answer, a get and a replay
// agree, and the holder is never told a later expiry than the store keeps.
// (The backend's replay answers no lock-delay: the Runtime fills it in from
// the request.)
func TestAcquireAnswersStoredPrecision(t *testing.T) {
	ctx := ctxT(t)
	b := open(t, migratedFile(t), newClock())
	req := protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Second + 999*time.Nanosecond,
		LockDelay: time.Minute + 999*time.Nanosecond, RequestID: "a"}
	res, err := b.Acquire(ctx, req)
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	got, err := b.Get(ctx, protocol.GetRequest{Key: req.Key, RequestID: "g"})
	wantStatus(t, "get", got, err, protocol.StatusFound)
	again, err := b.Acquire(ctx, req)
	wantStatus(t, "replayed acquire", again, err, protocol.StatusAcquired)
	for what, l := range map[string]*protocol.Lease{"get": got.Lease, "replay": again.Lease} {
		if !res.Lease.ExpiresAt.Equal(l.ExpiresAt) {
			t.Errorf("acquire answered expires_at %v; %s answers %v", res.Lease.ExpiresAt, what, l.ExpiresAt)
		}
	}
	if res.Lease.LockDelay != got.Lease.LockDelay {
		t.Errorf("acquire answered lock-delay %v; get answers %v", res.Lease.LockDelay, got.Lease.LockDelay)
	}
}
