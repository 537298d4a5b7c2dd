package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestRenewManyChunkFailsAlone: the Go client sends a RenewMany of more
// than MaxRenewManyRequest renewals in several requests; when one of them
// fails (the server answers 503), the renewals of the requests the server
// answered keep their outcomes (they were renewed) and only that
// request's renewals carry its failure (protocol.BulkRenewer: one lease's
// failure never fails the others). A call none of whose requests was
// answered fails as a whole, as before.
func TestRenewManyChunkFailsAlone(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	var calls atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/renew-many" && calls.Add(1) > 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"unavailable","message":"the store is down"}`)
			return
		}
		s.h.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	reqs := make([]protocol.RenewRequest, httpapi.MaxRenewManyRequest+1)
	for i := range reqs {
		l := hold(t, s.rt, protocol.Key{Namespace: "scan", Name: fmt.Sprintf("k%04d", i)}, "w")
		reqs[i] = protocol.RenewRequest{Key: l.Key, Owner: "w", Token: l.Token, TTL: 2 * time.Hour}
	}
	rt := newClient(t, front.URL, nil)
	results, err := rt.RenewMany(t.Context(), reqs)
	if err != nil || len(results) != len(reqs) {
		st := protocol.Status("")
		if len(results) > 0 {
			st = results[0].Status
		}
		t.Fatalf("RenewMany over two requests, the second failing: %d results, the first %q, error %v; want the first request's renewals renewed, no error",
			len(results), st, err)
	}
	// The first request's renewals (as many as fit its body) renewed, the
	// second's unavailable; the server tells the same.
	n := 0
	for n < len(results) && results[n].Status == protocol.StatusRenewed {
		n++
	}
	if n == 0 || n == len(results) {
		t.Fatalf("%d of %d renewals renewed, want those of the first request alone", n, len(results))
	}
	for i, res := range results {
		want, ttl := protocol.StatusRenewed, 2*time.Hour
		if i >= n {
			want, ttl = protocol.StatusUnavailable, time.Hour
		}
		if res.Status != want || res.Key != reqs[i].Key {
			t.Fatalf("renewal %d: %s %s (%s), want %s", i, res.Key, res.Status, res.Message, want)
		}
		got, err := s.rt.Get(t.Context(), protocol.GetRequest{Key: reqs[i].Key})
		if err != nil || got.Lease.ExpiresAt.Sub(got.Lease.RenewedAt) != ttl {
			t.Fatalf("lease %d on the server: %+v %v, want a TTL of %v", i, got.Lease, err, ttl)
		}
	}
	// One request, failed: nothing was answered, the call fails.
	results, err = rt.RenewMany(t.Context(), reqs[:1])
	if !errors.Is(err, protocol.ErrUnavailable) || len(results) != 1 || results[0].Status != protocol.StatusUnavailable {
		t.Fatalf("RenewMany of one failed request: %+v %v, want unavailable", results, err)
	}
}
