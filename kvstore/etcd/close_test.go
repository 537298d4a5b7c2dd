package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSubscribeAndFollowDuringClose: subscriptions and followers begun
// while the Backend closes either answer closed or are ended by Close:
// each subscription gets its last signal, each follower ends with closed,
// and Close's wait for the notify goroutines is never joined by one
// started as it waits (run with -race: a WaitGroup's Add from zero
// concurrent with its Wait is reported, or panics).
func TestSubscribeAndFollowDuringClose(t *testing.T) {
	c := etcdcluster.Shared(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix := c.Prefix(t)
	ctx := t.Context()
	const rounds, subscribers, followers = 60, 16, 2
	for round := range rounds {
		b, err := etcd.New(ctx, cli, &etcd.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range subscribers {
			wg.Go(func() {
				ch, cancel, err := b.Subscribe(ctx, key(fmt.Sprintf("k%d", i%4)))
				if err != nil {
					if !errors.Is(err, protocol.ErrClosed) {
						t.Errorf("round %d: subscribe during close: %v, want closed", round, err)
					}
					return
				}
				defer cancel()
				select {
				case <-ch: // the last signal, at the latest
				case <-time.After(10 * time.Second):
					t.Errorf("round %d: a subscription begun during close got no signal in 10s", round)
				}
			})
		}
		for range followers {
			wg.Go(func() {
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				for _, err := range b.Follow(fctx, audit.Query{}) {
					if err != nil && !errors.Is(err, protocol.ErrClosed) {
						t.Errorf("round %d: follow during close: %v, want closed", round, err)
					}
				}
				if fctx.Err() != nil {
					t.Errorf("round %d: a follower begun during close still followed 10s later", round)
				}
			})
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
