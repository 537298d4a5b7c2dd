package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestGetShowsTheLockDelay: GET /v1/leases/{ns}/{key} of a key kept by
// the lock-delay of its revoked lease answers 404 not_found (no live
// lease), the body carrying the ended lease (expires_at the revoke's
// time, lock_delay) and a message naming when the key is free; the Go
// client passes it through.
func TestGetShowsTheLockDelay(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	served := protocol.New(b, nil)
	h, err := httpapi.NewHandler(served, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); _ = served.Close(context.Background()) })
	k := protocol.Key{Namespace: "jobs", Name: "k"}
	acq, err := served.Acquire(t.Context(), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Hour, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := served.Revoke(t.Context(), protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + httpapi.LeasePath(k))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Lease   *struct {
			Owner     string `json:"owner"`
			Token     int64  `json:"token"`
			ExpiresAt string `json:"expires_at"`
			LockDelay string `json:"lock_delay"`
		} `json:"lease"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNotFound || body.Status != "not_found" || body.Lease == nil || body.Lease.Owner != "o" ||
		body.Lease.Token != acq.Lease.Token || body.Lease.LockDelay != "1h" || !strings.Contains(body.Message, "lock-delay until") {
		t.Fatalf("GET during the lock-delay: %d %+v (lease %+v), want 404 not_found carrying the ended lease", resp.StatusCode, body, body.Lease)
	}
	res, err := newClient(t, srv.URL, nil).Get(t.Context(), protocol.GetRequest{Key: k})
	if !errors.Is(err, protocol.ErrNotFound) || res.Status != protocol.StatusNotFound || res.Lease == nil ||
		res.Lease.Token != acq.Lease.Token || res.Lease.LockDelay != time.Hour || !strings.Contains(res.Message, "lock-delay until") {
		t.Fatalf("client get during the lock-delay: %+v (lease %+v), %v; want not_found carrying the ended lease", res, res.Lease, err)
	}
	if planned := rev.Lease.ExpiresAt; !res.Lease.ExpiresAt.Before(planned) {
		t.Fatalf("client get: the ended lease expires at %s, want the revoke's time, before its planned %s", res.Lease.ExpiresAt, planned)
	}
}
