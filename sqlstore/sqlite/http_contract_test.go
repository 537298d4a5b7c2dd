package sqlite_test

import (
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestContractOverHTTP runs the contract suite through the HTTP API: each
// case's two handles are httpapi clients of two servers on loopback ports,
// each serving its own Open of one fresh file.
func TestContractOverHTTP(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		path := migratedFile(t)
		cfg := func() *sqlite.Config { return sqlite.WithTestClock(nil, clock.Now) }
		first, err := sqlite.Open(ctxT(t), path, cfg())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		second, err := sqlite.Open(ctxT(t), path, cfg())
		if err != nil {
			_ = first.Close(ctxT(t))
			t.Fatalf("second Open: %v", err)
		}
		return httpcontract.Harness(t, first, second, first)
	})
}

// TestWaitOverHTTPIsWoken: a waiter over HTTP is woken by a release
// through another server on the file, not by its 30s re-check.
func TestWaitOverHTTPIsWoken(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	first, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	second, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		_ = first.Close(ctxT(t))
		t.Fatalf("second Open: %v", err)
	}
	httpcontract.Woken(t, first, second)
}
