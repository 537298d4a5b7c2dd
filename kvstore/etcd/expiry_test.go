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

func key(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }

// TestExpiryJudgedByCluster: with no test clock, a lease ends when the
// cluster ends its etcd lease: never before its expires_at (every get
// until then finds it), within a few seconds after; then its holder hears
// expired, and the next acquire gets a greater token.
func TestExpiryJudgedByCluster(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	a := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	b := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ctx := t.Context()
	res, err := a.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := *res.Lease
	if res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Second}); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("acquire of a held key: %v %v, want conflict", res.Status, err)
	}
	var ended time.Time
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		before := time.Now()
		res, err := b.Get(ctx, protocol.GetRequest{Key: key("k")})
		if err != nil && !errors.Is(err, protocol.ErrNotFound) {
			t.Fatal(err)
		}
		if res.Status == protocol.StatusNotFound {
			if before.Add(time.Millisecond).Before(l.ExpiresAt) {
				t.Fatalf("the lease ended at %v, before its expires_at %v", before, l.ExpiresAt)
			}
			ended = time.Now()
			break
		}
	}
	if ended.IsZero() {
		t.Fatal("the lease did not end within 15s")
	}
	t.Logf("the 1s lease ended between %v and %v after its expires_at", 0, ended.Sub(l.ExpiresAt).Round(time.Millisecond))
	for _, op := range []func() (protocol.Result, error){
		func() (protocol.Result, error) {
			return a.Renew(ctx, protocol.RenewRequest{Key: l.Key, Owner: "a", Token: l.Token, TTL: time.Second})
		},
		func() (protocol.Result, error) {
			return a.Release(ctx, protocol.ReleaseRequest{Key: l.Key, Owner: "a", Token: l.Token})
		},
	} {
		if res, err := op(); !errors.Is(err, protocol.ErrExpired) || res.Lease == nil || res.Lease.Token != l.Token {
			t.Fatalf("holder after the cluster ended the lease: %v %+v %v, want expired with the lease", res.Status, res.Lease, err)
		}
	}
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute})
	if err != nil || res.Lease.Token <= l.Token {
		t.Fatalf("acquire after expiry: %+v %v, want a token above %d", res.Lease, err, l.Token)
	}
}

// TestClientClockDoesNotDecide: a client whose clock runs an hour ahead
// cannot take over a lease another client holds (the cluster judges
// expiry), and a lease taken by a client whose clock runs an hour behind,
// stamped as expired long ago, is held for its TTL all the same.
func TestClientClockDoesNotDecide(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	ctx := t.Context()
	ok := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ahead := protocol.New(open(t, etcd.WithStampClock(&etcd.Config{Prefix: prefix}, func() time.Time { return time.Now().Add(time.Hour) })), nil)
	behind := protocol.New(open(t, etcd.WithStampClock(&etcd.Config{Prefix: prefix}, func() time.Time { return time.Now().Add(-time.Hour) })), nil)

	if _, err := ok.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "ok", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if res, err := ahead.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "ahead", TTL: 30 * time.Second}); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("a client an hour ahead took a held lease: %v %v", res.Status, err)
	}
	res, err := behind.Acquire(ctx, protocol.AcquireRequest{Key: key("late"), Owner: "behind", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.ExpiresAt.After(time.Now()) {
		t.Fatalf("stamped expiry %v, want an hour in the past", res.Lease.ExpiresAt)
	}
	taken := time.Now()
	if res, err := ok.Acquire(ctx, protocol.AcquireRequest{Key: key("late"), Owner: "ok", TTL: time.Second}); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("a lease stamped expired by its client's clock was taken over at once: %v %v", res.Status, err)
	}
	if got, err := ok.Get(ctx, protocol.GetRequest{Key: key("late")}); err != nil || time.Since(taken) < 2*time.Second && got.Status != protocol.StatusFound {
		t.Fatalf("get of a live lease stamped expired: %v %v", got.Status, err)
	}
}

// TestFormatVersion: a store whose meta entry names another format
// version is refused at open, naming both versions; a lease record of
// another version is refused when read.
func TestFormatVersion(t *testing.T) {
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
	if n, err := b.Format(ctx); err != nil || n != etcd.FormatVersion {
		t.Fatalf("format of a new store: %d %v, want %d", n, err, etcd.FormatVersion)
	}
	rt := protocol.New(b, nil)
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// A lease record written by a later release.
	r, err := cli.Get(ctx, b.Prefix()+"k/ns\x00k\x00r")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("renewal entry: %v %v", r, err)
	}
	if _, err := cli.Put(ctx, string(r.Kvs[0].Key), `{"v":2,"renewed_at":1,"expires_at":2,"ttl":3}`); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: key("k")}); !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "format version 2") {
		t.Fatalf("get of a version 2 lease record: %v, want unavailable naming version 2", err)
	}
	if _, err := cli.Put(ctx, b.Prefix()+"meta", `{"format":2}`); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err == nil || !contains(err, "format version 2") {
		t.Fatalf("health of a version 2 store: %v", err)
	}
	_, err = etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err == nil || !contains(err, "format version 2; this release reads version 1") {
		t.Fatalf("open of a version 2 store: %v", err)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// TestLockDelayJudgedByCluster: with no test clock, a revoked lease's
// lock-delay keeps the key from acquires (conflict carrying the ended
// lease) for at least the delay after the revoke, by the cluster's etcd
// lease; then the key is free.
func TestLockDelayJudgedByCluster(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	rt := protocol.New(open(t, &etcd.Config{Prefix: prefix}), nil)
	ctx := t.Context()
	const delay = 2 * time.Second
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute, LockDelay: delay})
	if err != nil || res.Lease.LockDelay != delay {
		t.Fatalf("acquire with a lock-delay: %+v %v", res.Lease, err)
	}
	revoked := time.Now()
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: key("k"), Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for {
		before := time.Now()
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "b", TTL: time.Minute})
		if err == nil {
			if before.Sub(revoked) < delay {
				t.Fatalf("acquired %v after the revoke, before the lock-delay of %v passed", before.Sub(revoked), delay)
			}
			t.Logf("acquired %v after the revoke (lock-delay %v)", time.Since(revoked).Round(time.Millisecond), delay)
			return
		}
		if !errors.Is(err, protocol.ErrConflict) || res.Lease == nil || res.Lease.Owner != "a" || !strings.Contains(res.Message, "lock-delay") {
			t.Fatalf("acquire during the lock-delay: %v %+v %q, want conflict carrying a's ended lease", err, res.Lease, res.Message)
		}
		if time.Since(revoked) > 15*time.Second {
			t.Fatal("the key was still delayed 15s after the revoke")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
