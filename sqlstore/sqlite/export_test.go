package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
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

// HoldWriter runs a write transaction that waits until release is called,
// so that the writes started meanwhile queue for one batch.
func HoldWriter(b *Backend) (release func()) {
	held, gone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = b.write(context.Background(), "", func(context.Context, *sql.Tx, time.Time) (protocol.Result, bool, error) {
			close(held)
			<-gone
			return protocol.Result{}, false, nil
		})
	}()
	<-held
	var once sync.Once
	return func() { once.Do(func() { gone <- struct{}{} }) }
}

// WriteQueueLen returns how many writes wait for a batch.
func WriteQueueLen(b *Backend) int {
	return b.writer.q.QueueLen()
}

// WriteBatches returns how many transactions of more than one write ran.
func WriteBatches(b *Backend) int64 {
	return b.writer.batches.Load()
}

// WriteBatchWrites returns how many writes the transactions WriteBatches
// counts held (those left out of their batch included).
func WriteBatchWrites(b *Backend) int64 { return b.writer.batched.Load() }

// FailingWrite runs a write that inserts a lease row and then fails with
// err, as a write that broke half way would.
func FailingWrite(ctx context.Context, b *Backend, name string, err error) error {
	return writeAfterInsert(ctx, b, name, func() (bool, error) { return false, err })
}

// SlowWrite runs a write that inserts a lease row named name, then waits
// until until (its deadline having passed, say) and asks to commit, as a
// write whose statements ran past its deadline would.
func SlowWrite(ctx context.Context, b *Backend, name string, until time.Time) error {
	return writeAfterInsert(ctx, b, name, func() (bool, error) {
		time.Sleep(time.Until(until))
		return true, nil
	})
}

// writeAfterInsert runs a write that inserts a lease row named name and
// then ends as then says: whether to commit, or an error.
func writeAfterInsert(ctx context.Context, b *Backend, name string, then func() (commit bool, err error)) error {
	_, werr := b.write(ctx, protocol.OpAcquire, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
		if _, e := tx.ExecContext(ctx, `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
			VALUES ('ns', ?1, 'o', 1, 0, 0, 9999999999999999, 1)`, name); e != nil {
			return protocol.Result{}, false, e
		}
		commit, err := then()
		return protocol.Result{}, commit, err
	})
	return werr
}

// SinceStart returns the id a read of the records at or after since
// starts after (qSinceStart with the backend's slack): every record at or
// below it is older than since.
func (b *Backend) SinceStart(ctx context.Context, since time.Time) (int64, error) {
	var start int64
	err := b.stmts.sinceStart.QueryRowContext(ctx, micros(since)-int64(sinceSlack/time.Microsecond)).Scan(&start)
	return start, err
}

// SinceSlack is sinceSlack, for tests.
const SinceSlack = sinceSlack

// PanickingWrite runs a write whose change panics with v once it holds
// the write lock (a bug in one write's answer building).
func PanickingWrite(ctx context.Context, b *Backend, v any) (protocol.Result, error) {
	return b.write(ctx, protocol.OpAcquire, func(context.Context, *sql.Tx, time.Time) (protocol.Result, bool, error) {
		panic(v)
	})
}

// WriteWithPanickingAfter runs a write that changes nothing, closing ran
// once the batch ran it, whose after function panics with v (a bug in
// one write's answer building).
func WriteWithPanickingAfter(ctx context.Context, b *Backend, ran chan<- struct{}, v any) (protocol.Result, error) {
	return b.writeThen(ctx, protocol.OpAcquire, func(context.Context, *sql.Tx, time.Time) (protocol.Result, bool, error) {
		close(ran)
		return protocol.Result{}, false, nil
	}, func(protocol.Result, error) (protocol.Result, error) { panic(v) })
}

// CloseLeftKeepers closes the keepers of replaced files that Backends left
// open (fileGuard.close), for TestMain once every test ran.
func CloseLeftKeepers() {
	leftOpen.mu.Lock()
	defer leftOpen.mu.Unlock()
	for _, db := range leftOpen.keepers {
		_ = db.Close()
	}
	leftOpen.keepers = nil
}
