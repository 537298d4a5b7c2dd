package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// An acquire whose answer was lost (the connection broke after the
// server committed it) and whose retry, under the same request id, the
// server refused for its token (a reload removed the token meanwhile)
// took the lease: the refusal of the retry says nothing of the first
// attempt. Hold must not present that outcome as known ("took nothing
// and is refused again: its error does not ask for another call"): its
// error names the request id, as for any acquire whose outcome is
// unknown, so that the caller can learn whether it holds the lease (and
// the scheduler keeps it, to resolve the orphan). It did not: the lease
// stays held, unknown to the caller, until its TTL.
func TestHoldAfterALostAnswerThenARefusalNamesTheRequestID(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	backend := memstore.New(nil)
	store := protocol.New(backend, nil)
	defer store.Close(context.Background())
	full, err := httpapi.ParseTokens(strings.NewReader(writerToken + " writer *\n"))
	if err != nil {
		t.Fatal(err)
	}
	none, err := httpapi.ParseTokens(strings.NewReader(adminToken + " admin *\n")) // the writer's token withdrawn
	if err != nil {
		t.Fatal(err)
	}
	var tokens atomic.Pointer[httpapi.Tokens]
	tokens.Store(full)
	h, err := httpapi.NewHandler(store, backend, &httpapi.Config{Tokens: tokens.Load})
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/acquire" && lost.CompareAndSwap(false, true) {
			h.ServeHTTP(httptest.NewRecorder(), r) // committed; its answer is lost
			tokens.Store(none)                     // a reload withdrew the token
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	rt := newClient(t, srv.URL, &httpapi.ClientConfig{Token: writerToken})
	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "scan", Name: "k"}, Owner: "w", TTL: time.Minute, RequestID: "req-lost-answer"}
	held, err := protocol.Hold(ctx, rt, req, nil)
	if err == nil {
		held.Release(ctx)
		t.Fatal("Hold after the token was withdrawn: no error")
	}
	got, gerr := store.Get(ctx, protocol.GetRequest{Key: req.Key})
	if gerr != nil || got.Lease == nil || got.Lease.Owner != "w" {
		t.Fatalf("the first attempt did not take the lease (%+v, %v): the test's premise fails", got, gerr)
	}
	if !strings.Contains(err.Error(), req.RequestID) {
		t.Fatalf("Hold whose first attempt took the lease (token %d) and whose retry was refused: %v; "+
			"want the request id %s named, as for an outcome unknown", got.Lease.Token, err, req.RequestID)
	}
}
