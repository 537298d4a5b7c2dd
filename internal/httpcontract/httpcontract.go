// Package httpcontract runs a backend's contract suite over HTTP: it serves
// two handles on one store, each through a protocol.Runtime and an
// httpapi.Handler on a real loopback port, and gives the suite two
// httpapi.Clients, so every case goes client → HTTP → server → store.
// Backends' tests call [Harness] from their contract factory, where their
// test-only clock option is at hand.
//
// Like contract, it must not import any database driver or any package
// under sqlstore/.
package httpcontract

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// Harness serves first and second (two handles on one fresh store; the
// harness owns them and closes them when the test ends) and returns the
// suite's harness of HTTP clients. reader reads the store's trail (first,
// usually).
//
// The HTTP API has no route for sweeping or pruning, which are the
// server's own business (its runtime sweeps; leasectl prunes): when the
// store can, the harness's first handle sweeps and its reader prunes the
// served store directly, and the suite checks what clients see over HTTP
// afterwards.
func Harness(t *testing.T, first, second protocol.Backend, reader audit.Reader) contract.Harness {
	t.Helper()
	c1 := serve(t, first, reader)
	c2 := serve(t, second, nil)
	h := contract.Harness{Backend: c1, Second: c2, Audit: c1}
	if s, ok := first.(protocol.Sweeper); ok {
		h.Backend = sweepingClient{Client: c1, sweeper: s}
	}
	if p, ok := reader.(audit.Pruner); ok {
		h.Audit = pruningReader{Reader: c1, pruner: p}
	}
	return h
}

// serve runs b behind a handler on a loopback port until the test ends,
// and returns a client of it.
func serve(t *testing.T, b protocol.Backend, reader audit.Reader) *httpapi.Client {
	t.Helper()
	// The suite's manual clock moves by hours: a background sweep would
	// remove rows the cases still look at.
	rt := protocol.New(b, &protocol.Config{DefaultTimeout: 30 * time.Second, Sweep: &protocol.SweepConfig{Every: -1}})
	if reader != nil {
		reader = audit.RuntimeReader(rt) // as leasectl serve reads it
	}
	h, err := httpapi.NewHandler(rt, reader, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close the served store: %v", err)
		}
	})
	c, err := httpapi.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// sweepingClient is the first client, sweeping the served store directly.
type sweepingClient struct {
	*httpapi.Client
	sweeper protocol.Sweeper
}

func (s sweepingClient) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	return s.sweeper.Sweep(ctx, max, grace)
}

// pruningReader reads the trail over HTTP and prunes the served store directly.
type pruningReader struct {
	audit.Reader
	pruner audit.Pruner
}

func (p pruningReader) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	return p.pruner.PruneAudit(ctx, r)
}
