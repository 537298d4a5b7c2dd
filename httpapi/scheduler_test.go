package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
)

// TestSchedulerOverHTTP runs the scheduler suite with every worker
// talking to the store through its own httpapi.Client, to one server on a
// loopback port serving an in-memory store.
func TestSchedulerOverHTTP(t *testing.T) {
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
		served := protocol.New(memstore.New(nil), nil)
		h, err := httpapi.NewHandler(served, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = served.Close(ctx)
		})
		return schedulertest.Harness{
			NewStore: func(t *testing.T) protocol.Store {
				c, err := httpapi.NewClient(srv.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				rt := protocol.New(c, nil)
				t.Cleanup(func() { _ = rt.Close(context.Background()) })
				return rt
			},
			Resource: schedulertest.MemResource(),
		}
	})
}
