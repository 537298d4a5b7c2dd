package httpapi_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestReplayedAcquireKeepsTheServedDefaultLockDelay: a served store's
// runtime fills an acquire's lock-delay from its namespace default, which
// the client's runtime does not know. A replay of that acquire (the same
// request id) must answer the lease's lock-delay as the first answer did.
// The client's runtime once set a replay's lock-delay from its own
// request (0) whatever the server answered.
func TestReplayedAcquireKeepsTheServedDefaultLockDelay(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	served := protocol.New(b, &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{{Namespaces: "jobs", Delay: 7 * time.Second}}})
	h, err := httpapi.NewHandler(served, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); _ = served.Close(context.Background()) })
	rt := newClient(t, srv.URL, nil)

	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "jobs", Name: "k"}, Owner: "o", TTL: time.Minute, RequestID: protocol.NewRequestID()}
	for _, attempt := range []string{"first", "replayed"} {
		res, err := rt.Acquire(t.Context(), req)
		if err != nil || res.Status != protocol.StatusAcquired || res.Lease == nil {
			t.Fatalf("%s acquire: %+v, %v", attempt, res, err)
		}
		if res.Replayed != (attempt == "replayed") {
			t.Fatalf("%s acquire: Replayed = %v", attempt, res.Replayed)
		}
		if res.Lease.LockDelay != 7*time.Second {
			t.Errorf("%s acquire: lock-delay %v, want the namespace default 7s", attempt, res.Lease.LockDelay)
		}
	}
}
