package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// A wait that stops (an interrupt, or --wait-timeout while an attempt was
// in flight) on a key a late store still keeps past the end of the
// lock-delay, or past the expiry of the lease it holds (etcd judges both
// late, never early), must not say that the key is free at, or held
// until, a time already past, but that the delay ended (the lease
// expired) then and the store has not yet freed the key.
func TestWaitStoppedOnALateStoreSaysNotYetFreed(t *testing.T) {
	t.Parallel()
	k := protocol.Key{Namespace: protocol.DefaultNamespace, Name: "k"}
	now := time.Now().UTC()
	ended := protocol.Lease{Key: k, Owner: "holder", Token: 7, ExpiresAt: now.Add(-2 * time.Second), LockDelay: time.Second}
	expired := protocol.Lease{Key: k, Owner: "holder", Token: 8, ExpiresAt: now.Add(-time.Second)}
	interrupted, cancel := context.WithCancel(t.Context())
	cancel()
	req := protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}
	for _, c := range []struct {
		what     string
		l        protocol.Lease
		msg      string
		at, want string
	}{
		{"past the lock-delay", ended, protocol.LockDelayPrefix + ended.LockDelayText(now), ended.FreeAt().Format(time.RFC3339Nano), "ended at "},
		{"past the expiry", expired, expired.ExpiredText(), expired.ExpiresAt.Format(time.RFC3339Nano), "expired at "},
	} {
		l := c.l
		met := &protocol.Error{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Key: k, Lease: &l, Message: c.msg}
		res := protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Key: k, Lease: &l, Message: c.msg}
		for _, got := range []struct {
			how string
			res protocol.Result
		}{
			{"stoppedWaiting", stoppedWaiting(req, waitFlags{wait: true, timeout: time.Second}, met)},
			{"interruptedWait", interruptedWait(interrupted, res)},
		} {
			m := got.res.Message
			if !strings.Contains(m, c.want+c.at) || !strings.Contains(m, "not yet") ||
				strings.Contains(m, "free at "+c.at) || strings.Contains(m, "until "+c.at) {
				t.Errorf("%s, %s: %q; want it to say %q and that the store has not yet freed the key, "+
					"not that the key is free at or held until %s, a time already past", c.what, got.how, m, c.want+c.at, c.at)
			}
			if strings.HasPrefix(c.msg, protocol.LockDelayPrefix) != keptByLockDelay(got.res) {
				t.Errorf("%s, %s: kept by the lock-delay %v, want the store's verdict kept (%q)", c.what, got.how, keptByLockDelay(got.res), c.msg)
			}
		}
	}
}
