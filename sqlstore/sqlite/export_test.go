package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// WithTestClock returns cfg (a new Config when nil) with now as the
// backend's clock. It exists only in this package's test binary.
func WithTestClock(cfg *Config, now func() time.Time) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.testNow = now
	return cfg
}

// SetPruneBatch sets how many records one prune transaction removes, until
// the test ends.
func SetPruneBatch(t interface{ Cleanup(func()) }, n int64) {
	old := pruneBatch
	pruneBatch = n
	t.Cleanup(func() { pruneBatch = old })
}

// ListPlan returns SQLite's query plan (EXPLAIN QUERY PLAN, one detail a
// line) of the statement List runs for req.
func (b *Backend) ListPlan(ctx context.Context, req protocol.ListRequest) (string, error) {
	_, q := b.listStatement(req)
	rows, err := b.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "ns", "", "", "\uffff", int64(0), 101, req.Owner)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n"), rows.Err()
}
