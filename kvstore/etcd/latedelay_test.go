package etcd_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestLateLockDelayIsNotCalledFree: the cluster ends a lock-delay late,
// never early (its etcd lease's whole seconds and the leader's expiry
// checks). In that window, after the delay's end by the clock and before
// the cluster removed the entry, an acquire still answers conflict and a
// get not_found carrying the ended lease; their messages must not say
// that the key is free at (or kept until) a time already past, but that
// the delay ended then and the store has not yet freed the key.
func TestLateLockDelayIsNotCalledFree(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	rt := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ctx := t.Context()
	const delay = time.Second
	var lateConflicts, lateGets int
	for try := 0; try < 3 && (lateConflicts == 0 || lateGets == 0); try++ {
		k := key("late-" + string(rune('a'+try)))
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "a", TTL: time.Minute, LockDelay: delay})
		if err != nil {
			t.Fatalf("acquire with a lock-delay: %v", err)
		}
		if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "test", Token: res.Lease.Token}); err != nil {
			t.Fatal(err)
		}
		// late checks one answer carrying the ended lease, sent at sent.
		late := func(what string, sent time.Time, res protocol.Result) bool {
			t.Helper()
			free := res.Lease.FreeAt()
			if !sent.After(free) {
				return false // within the delay by the clock: "free at" is true
			}
			at := free.UTC().Format(time.RFC3339Nano)
			if strings.Contains(res.Message, "free at "+at) || strings.Contains(res.Message, "until "+at) ||
				!strings.Contains(res.Message, "ended at "+at) || !strings.Contains(res.Message, "not yet") {
				t.Fatalf("%s sent %v after the lock-delay ended at %s (the cluster not yet past it): message %q; "+
					"want it to say the delay ended at %s and the store has not yet freed the key, not that the key is free then",
					what, sent.Sub(free).Round(time.Millisecond), at, res.Message, at)
			}
			return true
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			sent := time.Now()
			got, err := rt.Get(ctx, protocol.GetRequest{Key: k})
			if err != nil && !errors.Is(err, protocol.ErrNotFound) {
				t.Fatalf("get: %v", err)
			}
			if got.Lease != nil && late("get", sent, got) {
				lateGets++
			}
			sent = time.Now()
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "b", TTL: time.Minute})
			if err == nil {
				break
			}
			if !res.KeptByLockDelay() {
				t.Fatalf("acquire during the lock-delay: %v %q, want a conflict kept by the lock-delay", err, res.Message)
			}
			if late("acquire", sent, res) {
				lateConflicts++
			}
			if time.Now().After(deadline) {
				t.Fatal("the key was still delayed 15s after the revoke")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("answers in the late window: %d conflicts, %d gets", lateConflicts, lateGets)
	if lateConflicts == 0 || lateGets == 0 {
		t.Fatalf("in 3 tries the cluster ended every lock-delay within 20ms of its end by the clock: "+
			"no late window to check (%d conflicts, %d gets in it)", lateConflicts, lateGets)
	}
}

// TestLateExpiryIsExplained: the cluster sees a lease expire late, never
// early. In that window, after expires_at by the clock and before the
// cluster removed the liveness entry, an acquire answers conflict with a
// lease that has expired, and a get finds it; their messages must say that
// the lease expired then and the store has not yet freed the key, not
// leave the caller with a conflict it cannot tell from one with a live
// lease, or a get saying the key is held until a time already past.
func TestLateExpiryIsExplained(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	rt := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ctx := t.Context()
	var lateConflicts, lateGets int
	// late checks one answer carrying the lease, sent at sent.
	late := func(what string, sent time.Time, res protocol.Result) bool {
		t.Helper()
		if !sent.After(res.Lease.ExpiresAt) {
			return false // live by the clock: "held until" is true
		}
		at := res.Lease.ExpiresAt.UTC().Format(time.RFC3339Nano)
		if !strings.Contains(res.Message, "expired at "+at) || !strings.Contains(res.Message, "not yet") {
			t.Fatalf("%s sent %v after the lease expired at %s (the cluster not yet past it): message %q; "+
				"want it to say the lease expired at %s and the store has not yet freed the key",
				what, sent.Sub(res.Lease.ExpiresAt).Round(time.Millisecond), at, res.Message, at)
		}
		return true
	}
	for try := 0; try < 3 && (lateConflicts == 0 || lateGets == 0); try++ {
		k := key("late-expiry-" + string(rune('a'+try)))
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "a", TTL: time.Second}); err != nil {
			t.Fatalf("acquire: %v", err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			sent := time.Now()
			got, err := rt.Get(ctx, protocol.GetRequest{Key: k})
			if err != nil && !errors.Is(err, protocol.ErrNotFound) {
				t.Fatalf("get: %v", err)
			}
			if got.Lease != nil && late("get", sent, got) {
				lateGets++
			}
			sent = time.Now()
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "b", TTL: time.Minute})
			if err == nil {
				break
			}
			if res.Status != protocol.StatusConflict || res.Lease == nil {
				t.Fatalf("acquire of a held key: %v, want a conflict carrying the lease", err)
			}
			if late("acquire", sent, res) {
				lateConflicts++
			}
			if time.Now().After(deadline) {
				t.Fatal("the key was still held 15s after the lease's expiry")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("answers in the late window: %d conflicts, %d gets", lateConflicts, lateGets)
	if lateConflicts == 0 || lateGets == 0 {
		t.Fatalf("in 3 tries the cluster ended every lease within 20ms of its expiry by the clock: "+
			"no late window to check (%d conflicts, %d gets in it)", lateConflicts, lateGets)
	}
}
