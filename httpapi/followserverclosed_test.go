package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowOfAnOpenClientDoesNotAnswerClosedForTheServersStore: a
// server whose store was closed under a follow (a server shutting down,
// a rolling restart) ends the follow stream with an end event of status
// closed. The client was not closed, and every other call of it reports
// that server's closed store as unavailable ("server: its store is closed
// (shutting down?)"), worth a retry; its follow must say the same, not
// closed, which audit.Follower and DESIGN.md give as "this reader never
// answers again" (audit.Watch's callers and the follow's own caller stop
// on it), while this follow goes on reconnecting.
func TestFollowOfAnOpenClientDoesNotAnswerClosedForTheServersStore(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	rt := protocol.New(b, nil)
	h, err := httpapi.NewHandler(rt, b, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer rt.Close(context.Background())

	c, err := httpapi.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	key := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := c.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute, RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var followErr error
	closedServer := false
	for rec, err := range c.Follow(ctx, audit.Query{Namespace: "ns"}) {
		if err == nil && !closedServer {
			if rec.Key != "k" {
				t.Fatalf("first record %+v, want k's acquire", rec)
			}
			// The server's store closes (its shutdown) under the follow.
			if err := rt.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			closedServer = true
			continue
		}
		if err != nil {
			followErr = err
			break
		}
	}
	if followErr == nil {
		t.Fatalf("the follow yielded no error within 10s of the server's store's Close")
	}
	_, getErr := c.Get(t.Context(), protocol.GetRequest{Key: key})
	if protocol.StatusOf(getErr) != protocol.StatusUnavailable {
		t.Fatalf("get through the open client of a server whose store is closed: %v; want unavailable", getErr)
	}
	if errors.Is(followErr, protocol.ErrClosed) || protocol.StatusOf(followErr) != protocol.StatusOf(getErr) {
		t.Errorf("the follow of an open client, its server's store closed, yielded %v (status %q); want %q, as a get "+
			"through the same client answers (%v): closed says the client itself never answers again", followErr,
			protocol.StatusOf(followErr), protocol.StatusOf(getErr), getErr)
	}
}
