package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/leasestore/leasestore/backendkit"
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

// releaseWithoutWakeSQL is releaseSQL without its wake CTE: the release
// statement as it was before waiters were woken, for the benchmark that
// measures what waking costs.
var releaseWithoutWakeSQL = func() statement {
	st := releaseSQL
	i := strings.Index(st.sql, "), wake AS MATERIALIZED (")
	j := strings.Index(st.sql, ")\nSELECT (SELECT lock.now")
	if i < 0 || j < i {
		panic("postgres: releaseSQL has no wake CTE to strip")
	}
	st.sql = st.sql[:i] + st.sql[j:]
	st.sql = strings.Replace(st.sql, "\nLEFT JOIN wake ON true", "", 1)
	return st
}()

// ReleaseWithoutWake releases as Release does, through
// releaseWithoutWakeSQL; it answers released or an error.
func (b *Backend) ReleaseWithoutWake(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	a := b.changeArgs(req.Key, req.RequestID, backendkit.Fingerprint(req))
	a["owner"], a["token"] = req.Owner, req.Token
	return b.change(ctx, protocol.OpRelease, req.Key, releaseWithoutWakeSQL, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.after == nil {
			return protocol.Result{}, false, errors.New("release without wake: nothing released")
		}
		return protocol.Result{Status: protocol.StatusReleased, Lease: o.after}, false, nil
	})
}

// CoalesceStats returns how many statements of more than one operation the
// backend sent, and how many operations they held.
func CoalesceStats(b *Backend) (batches, ops, alone int64) {
	if b.co == nil {
		return 0, 0, 0
	}
	return b.co.batches.Load(), b.co.batched.Load(), b.co.alone.Load()
}

// QueueLen returns how many operations wait for a batch.
func QueueLen(b *Backend) int {
	return b.co.q.QueueLen()
}

// KeyChangePlan returns the plan, with actual row counts, of the statement
// Renew (op renew) or Release (op release) runs for the lease (key, owner,
// token), as EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) gives it under plan_cache_mode
// mode (auto, force_generic_plan or force_custom_plan). The statement's
// changes are rolled back.
func (b *Backend) KeyChangePlan(ctx context.Context, op protocol.Op, key protocol.Key, owner string, token int64, mode string) (string, error) {
	st := map[protocol.Op]statement{protocol.OpRenew: renewSQL, protocol.OpRelease: releaseSQL}[op]
	a := b.changeArgs(key, "plan-"+string(op), "")
	a["owner"], a["token"], a["ttl"] = owner, token, interval(time.Minute)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT set_config('plan_cache_mode', $1, true)", mode); err != nil {
		return "", err
	}
	var plan string
	err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+st.sql, st.bind(a)...).Scan(&plan)
	return plan, err
}

// Pooled reports whether b runs as behind a pooler that keeps no sessions.
func Pooled(b *Backend) bool { return b.pooled }
