//go:build unix

package etcd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestStoreCallsWithoutDeadlineAnswerUnderQuorumLoss: Migrate, Destroy,
// Counts, Created and Format (leasectl migrate's calls) called with a
// context that has no deadline waited for the cluster for ever while two
// of its three members were down, where every protocol operation answers
// by the runtime's default deadline (TestDirectCallWithoutDeadline...).
// Each must answer as they do: by protocol.DefaultTimeout, timeout or
// unavailable.
func TestStoreCallsWithoutDeadlineAnswerUnderQuorumLoss(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b := openOn(t, c, &etcd.Config{Prefix: "/no-deadline-store/"})
	if _, err := b.Acquire(t.Context(), protocol.AcquireRequest{Key: key("held"), Owner: "o", TTL: time.Minute, RequestID: "warm"}); err != nil {
		t.Fatal(err)
	}
	c.Kill(1)
	c.Kill(2)
	bg := context.Background() // no deadline, as a direct caller may pass
	var wg sync.WaitGroup
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Migrate", func() error { _, err := b.Migrate(bg); return err }},
		{"Counts", func() error { _, _, err := b.Counts(bg); return err }},
		{"Created", func() error { _, err := b.Created(bg); return err }},
		{"Format", func() error { _, err := b.Format(bg); return err }},
		{"Destroy", func() error { _, err := b.Destroy(bg); return err }},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answered := make(chan error, 1)
			start := time.Now()
			go func() { answered <- op.call() }()
			select {
			case err := <-answered:
				took := time.Since(start)
				if st := protocol.StatusOf(err); st != protocol.StatusTimeout && st != protocol.StatusUnavailable {
					t.Errorf("%s without a deadline, two of three members down: %v after %v; want timeout or unavailable",
						op.name, err, took.Round(time.Millisecond))
				}
				if took > protocol.DefaultTimeout+3*time.Second {
					t.Errorf("%s without a deadline, two of three members down: answered after %v; want by the default deadline %v",
						op.name, took.Round(time.Millisecond), protocol.DefaultTimeout)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("%s without a deadline, two of three members down: no answer after 20s; want one by the default deadline %v "+
					"(protocol.DefaultTimeout), as the runtime gives", op.name, protocol.DefaultTimeout)
				// The call still waits: the Backend's Close ends it.
			}
		}()
	}
	wg.Wait()
}
