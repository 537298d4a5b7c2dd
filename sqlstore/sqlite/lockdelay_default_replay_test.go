package sqlite_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestRetriedAcquireAfterTheServedDefaultChanged: a client's acquire
// asking for no lock-delay of its own takes the served namespace default
// (7s); its outcome unknown, the client retries it with the same request
// id, as the contract tells it to, and the retry reaches the server after
// a restart with another default (30s; serve --lock-delay changed), here a
// second server on the file. The retry carries the parameters the first
// attempt did, so it must replay the first answer (acquired, its token,
// lock-delay 7s), not answer invalid ("request id reused with different
// parameters"): the request id's parameters hash holds the default the
// server filled in, not what the client sent.
func TestRetriedAcquireAfterTheServedDefaultChanged(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	serve := func(delay time.Duration) protocol.Store {
		b, err := sqlite.Open(ctxT(t), path, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		served := protocol.New(b, &protocol.Config{LockDelays: []protocol.NamespaceLockDelay{{Namespaces: "jobs", Delay: delay}}})
		h, err := httpapi.NewHandler(served, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		c, err := httpapi.NewClient(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		rt := protocol.New(c, nil)
		t.Cleanup(func() {
			_ = rt.Close(context.Background())
			srv.Close()
			_ = served.Close(context.Background())
		})
		return rt
	}
	before, after := serve(7*time.Second), serve(30*time.Second)

	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "jobs", Name: "k"}, Owner: "o", TTL: time.Minute,
		RequestID: protocol.NewRequestID()}
	first, err := before.Acquire(ctxT(t), req)
	if err != nil || first.Lease == nil || first.Lease.LockDelay != 7*time.Second {
		t.Fatalf("first acquire: %+v, %v; want acquired with the served default lock-delay 7s", first, err)
	}
	again, err := after.Acquire(ctxT(t), req)
	if err != nil || !again.Replayed || again.Lease == nil || again.Lease.Token != first.Lease.Token {
		t.Fatalf("retried acquire (same request, same parameters) after the default changed: %s %q, %v; "+
			"want a replay of token %d", again.Status, again.Message, err, first.Lease.Token)
	}
	if again.Lease.LockDelay != 7*time.Second {
		t.Fatalf("retried acquire: lock-delay %v, want the first answer's 7s", again.Lease.LockDelay)
	}
}
