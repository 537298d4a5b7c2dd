//go:build unix

package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestSubscribeAnswersByItsDeadline: a subscription's first watch, made
// on a cluster that does not answer (every member frozen: a paused VM, a
// network that drops packets), waited until Close, whatever the caller's
// context said: etcd's client hands back a watch only once the cluster
// created it. Subscribe must answer by the caller's deadline, timeout
// matching the context's error, as the package's other calls do.
func TestSubscribeAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b, err := etcd.Open(t.Context(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: "/subscribe-deadline/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	resume := func() {
		for i := range c.Members {
			c.Resume(i)
		}
	}
	t.Cleanup(resume) // before Close and Stop
	for i := range c.Members {
		c.Pause(i)
	}
	gctx, gcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, gerr := b.Get(gctx, protocol.GetRequest{Key: key("k")})
	gcancel()
	if !errors.Is(gerr, protocol.ErrTimeout) {
		t.Fatalf("get on the frozen cluster: %v; want timeout: the cluster still answers, nothing tested", gerr)
	}

	sctx, scancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer scancel()
	type answer struct {
		cancel func()
		err    error
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() {
		_, cancel, err := b.Subscribe(sctx, key("k"))
		answered <- answer{cancel, err}
	}()
	var got answer
	select {
	case got = <-answered:
	case <-time.After(5 * time.Second):
		resume()
		_ = b.Close(context.Background()) // ends the wait
		got = <-answered
		t.Fatalf("Subscribe with a 300ms context on a cluster that does not answer: still waiting after 5s "+
			"(it answered %v once Close began); want by its deadline", got.err)
	}
	took := time.Since(start)
	if got.cancel != nil {
		got.cancel()
	}
	if took > time.Second {
		t.Fatalf("Subscribe with a 300ms context on a cluster that does not answer: answered after %v (%v); want by its deadline",
			took.Round(time.Millisecond), got.err)
	}
	if !errors.Is(got.err, protocol.ErrTimeout) || !errors.Is(got.err, context.DeadlineExceeded) {
		t.Errorf("Subscribe cut off by its deadline: %v; want timeout matching context.DeadlineExceeded", got.err)
	}
}
