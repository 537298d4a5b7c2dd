package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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

// WithHeldQueue returns cfg (a new Config when nil) whose fixed
// MaxInFlight keeps queued operations waiting for a slot however long, as
// before a round trip that overran let the queue go over the limit: a
// test forms a batch of the operations it queues behind a slot it holds
// (an operation on a key it keeps locked). It exists only in this
// package's test binary.
func WithHeldQueue(cfg *Config) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.testHeldQueue = true
	return cfg
}

// SetPruneBatch sets how many records one prune transaction removes, until
// the test ends.
func SetPruneBatch(t interface{ Cleanup(func()) }, n int64) {
	old := pruneBatch
	pruneBatch = n
	t.Cleanup(func() { pruneBatch = old })
}

// WithPruneBatchHook returns cfg (a new Config when nil) with fn run after
// each prune batch that committed and was not the prune's last, before
// the next begins: a test holds a prune between its batches there.
func WithPruneBatchHook(cfg *Config, fn func()) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.testBetweenPruneBatches = fn
	return cfg
}

// WithReconnectHook returns cfg (a new Config when nil) with fn run each
// time the listener is about to connect again after its connection broke
// (or an attempt failed): a test holds the listener disconnected there.
func WithReconnectHook(cfg *Config, fn func()) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.testBeforeReconnect = fn
	return cfg
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
var releaseWithoutWakeSQL = withoutParts(releaseSQL, releaseCuts, PartWake)

// The parts of the acquire and release statements that
// BenchmarkGuaranteeCost prices by cutting them out, one at a time. Each
// keeps a guarantee the raw pair lacks.
const (
	// PartKeyLock is the key's advisory lock, after which the change reads
	// its time (TestChangeTimesFollowLockWaits).
	PartKeyLock = "key-lock"
	// PartRequestCheck is the idempotency look-up of the request id
	// (a retry answers the first attempt's outcome).
	PartRequestCheck = "request-check"
	// PartAuditID is the audit id's era offset and the check that ids
	// never go back (a move to another cluster, a restore).
	PartAuditID = "audit-id"
	// PartWake wakes the key's waiters on release.
	PartWake = "wake"
)

// cut replaces what re matches, which must occur exactly times times
// (0: once).
type cut struct {
	re    *regexp.Regexp
	repl  string
	times int
}

var (
	keyLockCut = func(clause string) cut {
		return cut{re: regexp.MustCompile(`\n\s*` + clause + ` pg_advisory_xact_lock\(1818583411, hashtext\(\$\d+ \|\| '/' \|\| \$\d+\)\) IS NOT NULL`)}
	}
	requestCheckCut = func(times int) cut {
		return cut{re: regexp.MustCompile(`NOT EXISTS \(SELECT FROM leasestore_audit a WHERE a\.namespace = \$\d+ AND a\.request_id = \$\d+\)`),
			repl: "true", times: times}
	}
	auditIDCuts = []cut{
		{re: regexp.MustCompile(`(?s)CASE WHEN next\.checked THEN next\.id\s.*?leasestore_audit_went_back\(\) END`), repl: "pg_current_xact_id()::text::bigint"},
		{re: regexp.MustCompile(`(?s)\s*CROSS JOIN LATERAL \(SELECT pg_current_xact_id\(\).*? AS m\) AS next`)},
	}
	acquireCuts = map[string][]cut{
		PartKeyLock:      {keyLockCut("AND")},
		PartRequestCheck: {requestCheckCut(1)},
		PartAuditID:      auditIDCuts,
	}
	releaseCuts = map[string][]cut{
		PartKeyLock: {keyLockCut("WHERE")},
		// The release's UPDATE and its racedCTE test the request id.
		PartRequestCheck: {requestCheckCut(2)},
		PartAuditID:      auditIDCuts,
		PartWake: {
			{re: regexp.MustCompile(`(?s), wake AS MATERIALIZED \(.*?\n\)`)},
			{re: regexp.MustCompile(`\nLEFT JOIN wake ON true`)},
		},
	}
)

// withoutParts returns st with the SQL of parts cut out (parts a statement
// has no cut for are left alone). It panics when a cut does not match
// as often as it says: the statement changed, and the benchmark would
// price nothing.
func withoutParts(st statement, cuts map[string][]cut, parts ...string) statement {
	for _, part := range parts {
		for _, c := range cuts[part] {
			if n, want := len(c.re.FindAllStringIndex(st.sql, -1)), max(c.times, 1); n != want {
				panic(fmt.Sprintf("postgres: part %s: %s matches %d times, want %d", part, c.re, n, want))
			}
			st.sql = c.re.ReplaceAllLiteralString(st.sql, c.repl)
		}
	}
	return st
}

// Cycle acquires a key and releases it as Acquire and Release do, through
// their statements with some parts cut out (see [CycleWithout]).
type Cycle struct{ acquire, release statement }

// CycleWithout returns the cycle whose statements lack parts (PartKeyLock,
// ...); with none, the statements are the backend's own.
func CycleWithout(parts ...string) *Cycle {
	return &Cycle{acquire: withoutParts(acquireSQL, acquireCuts, parts...), release: withoutParts(releaseSQL, releaseCuts, parts...)}
}

// Run acquires key for owner for a minute and releases it; an error when
// either did not take effect.
func (c *Cycle) Run(ctx context.Context, b *Backend, key protocol.Key, owner string) error {
	a := b.changeArgs(key, protocol.RandomRequestID(), "")
	a["owner"], a["ttl"], a["lock_delay"] = owner, interval(time.Minute), interval(0)
	var token int64
	_, err := b.change(ctx, protocol.OpAcquire, key, c.acquire, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.after == nil {
			return protocol.Result{}, false, fmt.Errorf("cycle: %s not acquired", key.Name)
		}
		token = o.after.Token
		return protocol.Result{Status: protocol.StatusAcquired}, false, nil
	})
	if err != nil {
		return err
	}
	a = b.changeArgs(key, protocol.RandomRequestID(), "")
	a["owner"], a["token"] = owner, token
	_, err = b.change(ctx, protocol.OpRelease, key, c.release, a, func(o *outcome) (protocol.Result, bool, error) {
		if o.after == nil {
			return protocol.Result{}, false, fmt.Errorf("cycle: %s not released", key.Name)
		}
		return protocol.Result{Status: protocol.StatusReleased}, false, nil
	})
	return err
}

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
	s := b.Coalescing()
	return s.Batches, s.Batched, s.Alone
}

// InFlightLimit returns the coalescer's current limit of round trips in
// flight (0 without coalescing).
func InFlightLimit(b *Backend) int { return b.Coalescing().Limit }

// RefuseBatchFunction makes b's connections fail to create the batch
// function as a server without TEMP privilege on the database refuses it
// (SQLSTATE 42501), so that b stops batching as it would there. Call it
// before b's first batch.
func RefuseBatchFunction(b *Backend) {
	b.testBatchFnSQL = `DO $$ BEGIN RAISE insufficient_privilege USING MESSAGE = 'test: permission denied to create temporary tables'; END $$`
}

// NoBatch reports whether b stopped batching (the server refused the batch
// function).
func NoBatch(b *Backend) bool { return b.noBatch.Load() }

// Gathered returns how many of b's batches waited for their callers' next
// operations, and how many of those waits filled
// (backendkit.Coalescer.Gathered).
func Gathered(b *Backend) (waited, filled int64) { return b.co.q.Gathered() }

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

// ChangeStatementSQL returns the SQL text the backend prepares for op
// (acquire or release), as pg_prepared_statements shows it.
func ChangeStatementSQL(op protocol.Op) string {
	return map[protocol.Op]statement{protocol.OpAcquire: acquireSQL, protocol.OpRelease: releaseSQL}[op].sql
}

// TokenReadPlans returns the plans (EXPLAIN, not run) of the statements
// that read the greatest token in leasestore_leases: Health's and Open's
// settings check, the sequence's repair and fencing raise, by name.
func (b *Backend) TokenReadPlans(ctx context.Context) (map[string]string, error) {
	plans := map[string]string{}
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"settings": {settingsSQL, nil},
		"repair":   {repairSequenceSQL, nil},
		"raise":    {raiseTokensSQL.sql, raiseTokensSQL.bind(args{"by": int64(protocol.DefaultTokenRaise)})},
	} {
		rows, err := b.pool.Query(ctx, "EXPLAIN (COSTS OFF) "+q.sql, q.args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				rows.Close()
				return nil, err
			}
			lines = append(lines, line)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		plans[name] = strings.Join(lines, "\n")
	}
	return plans, nil
}

// BatchCycle acquires keys for owner for a minute in one batch (the
// coalescer's statement, changeBatchSQL) and releases them in another; an
// error when any member did not take effect.
func (b *Backend) BatchCycle(ctx context.Context, keys []protocol.Key, owner string) error {
	batch := make([]*pendingOp, len(keys))
	for i, k := range keys {
		a := b.changeArgs(k, protocol.RandomRequestID(), "")
		a["owner"], a["ttl"], a["lock_delay"] = owner, interval(time.Minute), interval(0)
		batch[i] = &pendingOp{op: protocol.OpAcquire, key: k, a: a}
	}
	tokens := make([]int64, len(keys))
	if err := b.sendBatch(ctx, batch); err != nil {
		return err
	}
	for i, p := range batch {
		if p.err != nil || p.o == nil || p.o.after == nil {
			return fmt.Errorf("batch cycle: %s not acquired (%v)", p.key.Name, p.err)
		}
		tokens[i] = p.o.after.Token
	}
	for i, k := range keys {
		a := b.changeArgs(k, protocol.RandomRequestID(), "")
		a["owner"], a["token"] = owner, tokens[i]
		batch[i] = &pendingOp{op: protocol.OpRelease, key: k, a: a}
	}
	if err := b.sendBatch(ctx, batch); err != nil {
		return err
	}
	for _, p := range batch {
		if p.err != nil || p.o == nil || p.o.after == nil {
			return fmt.Errorf("batch cycle: %s not released (%v)", p.key.Name, p.err)
		}
	}
	return nil
}

// WithoutBatchSubtransactions makes b's connections create the batch
// function without a subtransaction per member, for BenchmarkBatchCost
// only: a member's record id is then made from the batch's transaction id
// and the member's place, ids no other statement makes, and one member's
// error fails the whole batch. Call it before b's first batch.
func WithoutBatchSubtransactions(b *Backend) error {
	fn := changeBatchFnSQL
	handler := strings.Index(fn, "        EXCEPTION WHEN OTHERS THEN")
	end := strings.Index(fn, "        END;\n        RETURN NEXT;")
	id := "v_xid + ((after.xmin::text::bigint - v_xid % 4294967296 + 4294967296) % 4294967296)\n                                               + v_off AS id"
	if handler < 0 || end < handler || strings.Count(fn, id) != 3 {
		return errors.New("WithoutBatchSubtransactions: the batch function's text changed; update the cut")
	}
	fn = fn[:handler] + fn[end:]
	b.testBatchFnSQL = strings.ReplaceAll(fn, id, "(v_xid + v_off) * 64 + i AS id")
	return nil
}

// WaitLockMask is the mask that picks a waiter's lock id from its key's
// hash (waitLockMask): keys in one bucket share the listener's lock.
const WaitLockMask = waitLockMask

// SinceStart returns the id a read of the records at or after since
// starts after (sinceStartSQL with the backend's slack): no record at or
// below it is at or after since.
func (b *Backend) SinceStart(ctx context.Context, since time.Time) (int64, error) {
	var start int64
	err := b.pool.QueryRow(ctx, sinceStartSQL.sql, sinceStartSQL.bind(args{"since": since, "slack": interval(statementSlack)})...).Scan(&start)
	return start, err
}

// SinceStartPlan returns the plan (EXPLAIN, text) of sinceStartSQL for a
// read since since, made by b's pool as PostgreSQL would make it after
// five executions when generic is true (plan_cache_mode
// force_generic_plan), else with the values (force_custom_plan).
func (b *Backend) SinceStartPlan(ctx context.Context, since time.Time, generic bool) (string, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	mode := map[bool]string{true: "force_generic_plan", false: "force_custom_plan"}[generic]
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		return "", err
	}
	defer func() { _, _ = conn.Exec(context.Background(), "RESET plan_cache_mode") }()
	if len(sinceStartSQL.names) != 2 || sinceStartSQL.names[0] != "since" || sinceStartSQL.names[1] != "slack" {
		return "", fmt.Errorf("sinceStartSQL's parameters are %v, not [since slack]", sinceStartSQL.names)
	}
	if _, err := conn.Exec(ctx, "PREPARE since_start_plan(timestamptz, interval) AS "+sinceStartSQL.sql); err != nil {
		return "", err
	}
	defer func() { _, _ = conn.Exec(context.Background(), "DEALLOCATE since_start_plan") }()
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE since_start_plan('%s', '%d microseconds')",
		since.UTC().Format(time.RFC3339Nano), statementSlack.Microseconds()))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), rows.Err()
}
