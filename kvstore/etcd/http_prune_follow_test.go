package etcd_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/followprune"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// A follower of one key through a served etcd store keeps its place past
// other keys' records across a broken stream, as through a served SQL
// store (sqlite's TestFollowOverHTTPOutlivesAPruneOfRecordsItPassed; the
// operator guide: "through a served store across a broken stream too, from
// the stream's position events"): a prune of those records while it is
// away must not end it behind the prune. The server's stream over etcd
// (the backend's own Follow) told no position, so the client reconnected
// from its last record, below what the prune removed.
func TestFollowOverHTTPOutlivesAPruneOfRecordsItPassed(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	b := openOwned(t, &etcd.Config{Prefix: prefix})
	// The store's clock is the client's: a few milliseconds between writes
	// stamp them apart, before the prune's cut-off.
	followprune.Run(t, followprune.Store{Backend: b, Tick: func() { time.Sleep(10 * time.Millisecond) }, Now: time.Now})
}
