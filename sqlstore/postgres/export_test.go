package postgres

import (
	"context"
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

// ListPlan returns the plan, with actual row counts, of the statement List
// runs for req, as EXPLAIN (ANALYZE, FORMAT JSON) gives it.
func (b *Backend) ListPlan(ctx context.Context, req protocol.ListRequest) (string, error) {
	a := args{"ns": req.Namespace, "prefix": req.Prefix, "after": "", "owner": req.Owner,
		"now": b.clock(), "limit": 101}
	st := listStatement(req)
	var plan string
	err := b.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.sql, st.bind(a)...).Scan(&plan)
	return plan, err
}
