package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestRevisionGoingBackIsRefused: fencing tokens are etcd revisions, so a
// cluster whose revision goes back (restored from a snapshot without
// --bump-revision, or replaced by another cluster at the same addresses)
// would issue tokens already issued. A process that saw the higher
// revision refuses every operation from then on, unavailable, with a
// message naming the restore and the fix, and writes nothing more: the
// old backend went on and issued a token it had issued before. Both an
// opened backend (its own client) and one on a caller's client (New). (A
// one-member cluster of the test's own, replaced by a fresh one.)
func TestRevisionGoingBackIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, &etcdcluster.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	const prefix = "/restore/"
	host := strings.TrimPrefix(c.Members[0].ClientURL, "http://")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	onCaller, err := etcd.New(ctx, cli, &etcd.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onCaller.Close(context.Background()) })
	stores := map[string]*protocol.Runtime{
		"open": protocol.New(openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: prefix}), nil),
		"new":  protocol.New(onCaller, nil),
	}
	// Raise the revision well above what the fresh cluster reaches.
	highest := int64(0)
	for i := range 20 {
		for name, rt := range stores {
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("%s-%d", name, i)), Owner: "o", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			highest = max(highest, res.Lease.Token)
		}
	}
	if err := c.Replace(ctx); err != nil {
		t.Fatal(err)
	}
	for name, rt := range stores {
		// The first answer from the fresh cluster: until the client has
		// reconnected, operations fail as unavailable for that reason.
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var res protocol.Result
			res, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name + "-after"), Owner: "o", TTL: time.Minute})
			if err == nil {
				t.Fatalf("%s: acquire after the revision went back: token %d, not above %d already issued", name, res.Lease.Token, highest)
			}
			if strings.Contains(err.Error(), "went back") || time.Now().After(deadline) {
				break
			}
		}
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "--bump-revision") {
			t.Fatalf("%s: acquire after the revision went back: %v; want unavailable naming --bump-revision", name, err)
		}
		// From then on, refused without being sent.
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name + "-later"), Owner: "o", TTL: time.Minute}); !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "went back") {
			t.Errorf("%s: a later acquire: %v; want it refused as the first", name, err)
		}
		if err := rt.Health(ctx); err == nil || !strings.Contains(err.Error(), "went back") {
			t.Errorf("%s: health after the revision went back: %v; want it to say so", name, err)
		}
		got, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range got.Kvs {
			if strings.Contains(string(kv.Key), name+"-later") {
				t.Errorf("%s: the later acquire wrote %s", name, kv.Key)
			}
		}
	}
}
