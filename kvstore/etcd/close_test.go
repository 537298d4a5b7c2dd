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

// TestOperationsInFlightAtCloseAnswerClosed: on a Backend from Open, which
// owns its client, an operation still running when Close closes the
// client answers closed, as one begun after Close does, not unavailable
// (the client being closed is Close's doing, not the cluster's), and at
// once: the client retries a call its closing cut short for about 2.5s,
// which ran past a call's deadline (5s when called without one) under
// load, and the call then answered timeout.
func TestOperationsInFlightAtCloseAnswerClosed(t *testing.T) {
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	ctx := t.Context()
	const rounds, workers = 20, 8
	for round := range rounds {
		b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range workers {
			wg.Go(func() {
				for n := 0; ; n++ {
					var err error
					switch (i + n) % 3 {
					case 0:
						_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "o",
							TTL: time.Minute, RequestID: fmt.Sprintf("r%d-%d-%d", round, i, n)})
					case 1:
						_, err = b.Get(ctx, protocol.GetRequest{Key: key(fmt.Sprintf("k%d", i)), RequestID: fmt.Sprintf("g%d-%d-%d", round, i, n)})
					default:
						err = b.Health(ctx)
					}
					if err != nil {
						if !errors.Is(err, protocol.ErrClosed) {
							t.Errorf("round %d: an operation running as Close closed the client: %v, want closed", round, err)
						}
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(2000+rand.IntN(3000)) * time.Microsecond)
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		wg.Wait()
		if waited := time.Since(closed); waited > 2*time.Second {
			t.Errorf("round %d: the operations in flight answered %v after Close returned, want at once", round, waited.Round(time.Millisecond))
		}
		if t.Failed() {
			return
		}
	}
}
