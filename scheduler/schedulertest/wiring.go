package schedulertest

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// Rows is what [ScanWrites] reads: database/sql's *sql.Rows and pgx's
// Rows both are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanWrites reads a SQL resource's accepted writes, one row of (target,
// token, writer) each, in order; the caller closes rows.
func ScanWrites(rows Rows) ([]Write, error) {
	var out []Write
	for rows.Next() {
		var w Write
		if err := rows.Scan(&w.Target, &w.Token, &w.Writer); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// OpenStore is a [Harness].NewStore body: it opens a backend with open
// (failing t when that fails) and returns a runtime over it that is closed
// when t ends.
func OpenStore[B protocol.Backend](t *testing.T, open func() (B, error)) protocol.Store {
	t.Helper()
	b, err := open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}
