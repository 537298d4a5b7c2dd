//go:build unix

package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestDirectCallWithoutDeadlineAnswersUnderQuorumLoss: the runtime gives
// every operation a deadline (protocol.DefaultTimeout when the caller
// gives none); a Backend called directly with a context that has none
// waited for the cluster for ever while two of its three members were
// down. It must answer as the runtime would: by the default deadline,
// timeout or unavailable (retry with the same request id).
func TestDirectCallWithoutDeadlineAnswersUnderQuorumLoss(t *testing.T) {
	t.Parallel()
	c, err := etcdcluster.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	b := openOn(t, c, &etcd.Config{Prefix: "/no-deadline/"})
	if _, err := b.Acquire(t.Context(), protocol.AcquireRequest{Key: key("held"), Owner: "o", TTL: time.Minute, RequestID: "warm"}); err != nil {
		t.Fatal(err)
	}
	c.Kill(1)
	c.Kill(2)
	bg := context.Background() // no deadline, as a direct caller may pass
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"acquire", func() error {
			_, err := b.Acquire(bg, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
			return err
		}},
		{"get", func() error { _, err := b.Get(bg, protocol.GetRequest{Key: key("held")}); return err }},
		{"health", func() error { return b.Health(bg) }},
	} {
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
	}
}
