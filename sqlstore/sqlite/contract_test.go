package sqlite_test

import (
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestContract runs the backend contract suite. Each subtest gets a fresh,
// migrated file; the second handle is a second Open of that file (its own
// *sql.DB and write slot), as another process would have it.
func TestContract(t *testing.T) {
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
		return contract.Harness{Backend: first, Second: second, Audit: first}
	})
}
