package protocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A wait that gives up while the lock-delay of a revoked lease keeps the
// key answers the conflict of its last attempt, which the store said a
// lock-delay caused. Contract v3: such a conflict's message starts
// "lock-delay: " (Result.KeptByLockDelay), and the scheduler, leasectl's
// output and run tell it from a live holder by that; the wait's answer
// must stay so, not read "held by O with token N until T" for a lease that
// ended at T.
func TestAcquireWaitGivingUpKeepsTheLockDelayVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "wait", Name: t.Name()}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	first, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute})
	if !first.KeptByLockDelay() {
		t.Fatalf("an acquire after the revoke answered %q (%v), want a conflict kept by the lock-delay", first.Status, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	res, err := protocol.AcquireWait(waitCtx, rt, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
	if res.Status != protocol.StatusConflict || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the wait answered %q (%v), want conflict matching context.DeadlineExceeded", res.Status, err)
	}
	var pe *protocol.Error
	if !res.KeptByLockDelay() || !errors.As(err, &pe) || !pe.KeptByLockDelay() {
		t.Fatalf("the wait's conflict (message %q) is not kept by the lock-delay (Result %v, Error %v); want the store's verdict kept, as its last attempt had it (%q)",
			res.Message, res.KeptByLockDelay(), pe != nil && pe.KeptByLockDelay(), first.Message)
	}
}

// lateStore answers every acquire conflict with its lease, as a store that
// sees expiry and the end of a lock-delay late, never early (etcd), does
// past them: msg is the store's message.
type lateStore struct {
	protocol.Store
	lease protocol.Lease
	msg   string
}

func (s lateStore) Acquire(context.Context, protocol.AcquireRequest) (protocol.Result, error) {
	l := s.lease
	return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Key: l.Key, Lease: &l, Message: s.msg}, nil
}

// A wait that gives up on a key a late store still keeps past the end of
// the lock-delay, or past the expiry of the lease it holds, must not say
// that the key is free at, or held until, a time already past when it
// answers, but that the delay ended (the lease expired) then and the store
// has not yet freed the key.
func TestAcquireWaitGivingUpOnALateStoreSaysNotYetFreed(t *testing.T) {
	t.Parallel()
	k := protocol.Key{Namespace: "wait", Name: t.Name()}
	now := time.Now().UTC()
	ended := protocol.Lease{Key: k, Owner: "holder", Token: 7, ExpiresAt: now.Add(-2 * time.Second), LockDelay: time.Second}
	expired := protocol.Lease{Key: k, Owner: "holder", Token: 8, ExpiresAt: now.Add(-time.Second)}
	for _, c := range []struct {
		what         string
		s            lateStore
		at, want     string
		notFree, not string
	}{
		{"past the lock-delay", lateStore{lease: ended, msg: protocol.LockDelayPrefix + ended.LockDelayText(now)},
			ended.FreeAt().Format(time.RFC3339Nano), "ended at ", "free at ", "until "},
		{"past the expiry", lateStore{lease: expired, msg: expired.ExpiredText()},
			expired.ExpiresAt.Format(time.RFC3339Nano), "expired at ", "free at ", "until "},
	} {
		wctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		res, err := protocol.AcquireWait(wctx, c.s, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
		cancel()
		if res.Status != protocol.StatusConflict || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: the wait answered %q (%v), want conflict matching context.DeadlineExceeded", c.what, res.Status, err)
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Message != res.Message {
			t.Fatalf("%s: the wait's error %v does not carry its message %q", c.what, err, res.Message)
		}
		if !strings.Contains(res.Message, "gave up waiting") || !strings.Contains(res.Message, c.want+c.at) ||
			!strings.Contains(res.Message, "not yet") || strings.Contains(res.Message, c.notFree+c.at) || strings.Contains(res.Message, c.not+c.at) {
			t.Errorf("%s: the wait gave up with %q; want it to say it gave up waiting, %q and that the store has not yet freed the key, "+
				"not that the key is free at or held until %s, a time already past", c.what, res.Message, c.want+c.at, c.at)
		}
		if strings.HasPrefix(c.s.msg, protocol.LockDelayPrefix) != res.KeptByLockDelay() {
			t.Errorf("%s: the wait's conflict KeptByLockDelay %v, want the store's verdict kept (%q)", c.what, res.KeptByLockDelay(), c.s.msg)
		}
	}
}
