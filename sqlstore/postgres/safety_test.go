package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The tests in this file each reproduce something a DBA, an operator or a
// retry can do to the store that once broke a guarantee.

// withServerOption returns dsn with "-c name=value" added to its options
// startup parameter, as a DBA's ALTER ROLE/DATABASE ... SET would apply to
// every session.
func withServerOption(t *testing.T, dsn, name, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	opt := strings.TrimSpace(q.Get("options") + " -c " + name + "=" + value)
	q.Set("options", opt)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	return u.String()
}

// borrowedBackend wraps a pool the test makes from dsn, as a service that
// shares its own pool would, and closes both when the test ends.
func borrowedBackend(t *testing.T, dsn string) (*postgres.Backend, *pgxpool.Pool) {
	t.Helper()
	pool := rawPool(t, dsn)
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b, pool
}

func setting(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var v string
	if err := pool.QueryRow(ctxT(t), "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSerializableIsolationAnswersTrueStatus races two acquires of one key
// from two pools whose sessions default to serializable (as after ALTER
// DATABASE ... SET default_transaction_isolation = 'serializable'): one must
// answer acquired and the other conflict, never unavailable (SQLSTATE 40001).
// The pools are borrowed, so the backend cannot pin the isolation level and
// must run a statement that failed to serialize again.
func TestSerializableIsolationAnswersTrueStatus(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"serializable", "repeatable read"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			dsn := withServerOption(t, pgtest.MigratedDSN(t), "default_transaction_isolation", strings.ReplaceAll(level, " ", "\\ "))
			a, pa := borrowedBackend(t, dsn)
			b, _ := borrowedBackend(t, dsn)
			if got := setting(t, pa, "default_transaction_isolation"); got != level {
				t.Fatalf("the borrowed pool's isolation is %q, want %q (the test would prove nothing)", got, level)
			}
			const rounds = 25
			for round := range rounds {
				name := fmt.Sprintf("k%d", round)
				results, errs := race(2, a, b, func(i int, h *postgres.Backend) (protocol.Result, error) {
					return h.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: fmt.Sprintf("w%d", i),
						TTL: time.Minute, RequestID: fmt.Sprintf("%s-%d", name, i)})
				})
				statuses := map[protocol.Status]int{}
				for i, r := range results {
					if errs[i] != nil {
						t.Fatalf("round %d: acquire %d: %v", round, i, errs[i])
					}
					statuses[r.Status]++
				}
				if statuses[protocol.StatusAcquired] != 1 || statuses[protocol.StatusConflict] != 1 {
					t.Fatalf("round %d: %v, want one acquired and one conflict", round, statuses)
				}
				// Renew and release race as well under this level.
				held := results[0].Lease
				if results[1].Status == protocol.StatusAcquired {
					held = results[1].Lease
				}
				results, errs = race(4, a, b, func(i int, h *postgres.Backend) (protocol.Result, error) {
					if i%2 == 0 {
						return h.Renew(ctxT(t), protocol.RenewRequest{Key: key(name), Owner: held.Owner, Token: held.Token,
							TTL: time.Minute, RequestID: fmt.Sprintf("%s-renew-%d", name, i)})
					}
					return h.Release(ctxT(t), protocol.ReleaseRequest{Key: key(name), Owner: held.Owner, Token: held.Token,
						RequestID: fmt.Sprintf("%s-release", name)})
				})
				for i, r := range results {
					if errs[i] != nil {
						t.Fatalf("round %d: op %d: %v", round, i, errs[i])
					}
					if r.Status != protocol.StatusRenewed && r.Status != protocol.StatusReleased && r.Status != protocol.StatusNotFound {
						t.Fatalf("round %d: op %d answered %s: %s", round, i, r.Status, r.Message)
					}
				}
			}
		})
	}
}

// TestOpenPinsReadCommittedAndSynchronousCommit opens a pool whose DSN asks
// for serializable and synchronous_commit off: the backend's connections
// must run read committed with synchronous_commit on, and a stronger
// synchronous_commit is kept.
func TestOpenPinsReadCommittedAndSynchronousCommit(t *testing.T) {
	t.Parallel()
	base := pgtest.MigratedDSN(t)
	dsn := withServerOption(t, withServerOption(t, base, "default_transaction_isolation", "serializable"),
		"synchronous_commit", "off")
	b := openBackend(t, dsn, nil)
	for range 3 { // every connection, not only the first
		conn, err := b.Pool().Acquire(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		var iso, sc string
		if err := conn.QueryRow(ctxT(t), "SELECT current_setting('default_transaction_isolation'), current_setting('synchronous_commit')").Scan(&iso, &sc); err != nil {
			t.Fatal(err)
		}
		if iso != "read committed" || sc != "on" {
			t.Fatalf("connection settings: isolation %q, synchronous_commit %q; want read committed and on", iso, sc)
		}
	}
	strong := openBackend(t, withServerOption(t, base, "synchronous_commit", "remote_apply"), nil)
	if got := setting(t, strong.Pool(), "synchronous_commit"); got != "remote_apply" {
		t.Fatalf("synchronous_commit %q, want the stronger remote_apply kept", got)
	}
}

// TestBorrowedPoolWithoutSynchronousCommitRefused: a pool the backend does
// not own, whose sessions commit asynchronously, could lose a committed
// acquire in a crash and issue its token again; New and Health refuse it,
// naming the fix.
func TestBorrowedPoolWithoutSynchronousCommitRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	pool := rawPool(t, withServerOption(t, dsn, "synchronous_commit", "off"))
	_, err := postgres.New(ctxT(t), pool, nil)
	wantErrStatus(t, "new on an asynchronous pool", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "synchronous_commit") || !strings.Contains(err.Error(), "postgres.Open") {
		t.Fatalf("error %q does not name the fix", err)
	}

	_, err = postgres.New(ctxT(t), rawPool(t, withServerOption(t, dsn, "synchronous_commit", "local")), nil)
	wantErrStatus(t, "new on a pool committing locally", err, protocol.StatusUnavailable)

	// A DBA turns it off while the service runs: the pool's new sessions
	// are asynchronous, and Health says so.
	var dbaTurnedItOff atomic.Bool
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if dbaTurnedItOff.Load() {
			_, err := c.Exec(ctx, "SET synchronous_commit = off")
			return err
		}
		return nil
	}
	pool, err = pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatalf("new on a synchronous pool: %v", err)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health: %v", err)
	}
	dbaTurnedItOff.Store(true)
	pool.Reset()
	wantErrStatus(t, "health once sessions commit asynchronously", b.Health(ctxT(t)), protocol.StatusUnavailable)
}

// TestCachedFencingSequenceKeepsTokensIncreasing: after ALTER SEQUENCE
// leasestore_fencing_seq CACHE 20, sessions hand out sequence values out of
// order. Two long-lived backends taking one key in turn must still see its
// token strictly increase, and Open and Health refuse the setting, naming
// the fix.
func TestCachedFencingSequenceKeepsTokensIncreasing(t *testing.T) {
	t.Parallel()
	a, b, dsn := twoHandles(t, nil)
	raw := rawPool(t, dsn)
	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq CACHE 20")
	handles := []*postgres.Backend{a, b}
	var last int64
	const acquires = 200
	for i := range acquires {
		h := handles[i%2]
		res, err := h.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: fmt.Sprintf("w%d", i%2), TTL: time.Minute,
			RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		if res.Lease.Token <= last {
			t.Fatalf("acquire %d: token %d after %d: tokens of a key went backwards", i, res.Lease.Token, last)
		}
		last = res.Lease.Token
		if i%3 == 2 {
			_, err = h.Revoke(ctxT(t), protocol.RevokeRequest{Key: key("k"), Actor: "op", Reason: "r", RequestID: fmt.Sprintf("v%d", i)})
		} else {
			_, err = h.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: res.Lease.Owner, Token: res.Lease.Token,
				RequestID: fmt.Sprintf("r%d", i)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	err := a.Health(ctxT(t))
	wantErrStatus(t, "health with a caching sequence", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "CACHE 1") {
		t.Fatalf("health: %q does not name the fix", err)
	}
	_, err = postgres.Open(ctxT(t), dsn, nil)
	wantErrStatus(t, "open with a caching sequence", err, protocol.StatusUnavailable)

	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq CACHE 1")
	if err := a.Health(ctxT(t)); err != nil {
		t.Fatalf("health after the fix: %v", err)
	}
}

// TestFencingSequenceBehindIssuedTokens: a logical-replication switchover
// (or a restore that did not carry the sequence) leaves
// leasestore_fencing_seq behind tokens already issued. A key's next token
// must still be greater than its last, at once, and Health moves the
// sequence past every issued token.
func TestFencingSequenceBehindIssuedTokens(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	var high int64
	for i := range 20 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i%4)), Owner: "w", TTL: time.Minute,
			RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		high = res.Lease.Token
		if _, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: res.Lease.Key, Owner: "w", Token: res.Lease.Token,
			RequestID: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The switchover: the new primary's sequence starts again.
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1, false)")
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k3"), Owner: "w", TTL: time.Minute, RequestID: "after"})
	wantStatus(t, "acquire after the switchover", res, err, protocol.StatusAcquired)
	if res.Lease.Token <= high {
		t.Fatalf("token %d after the switchover, want more than the key's last, %d", res.Lease.Token, high)
	}
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health: %v", err)
	}
	if n := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq"); int64(n) < res.Lease.Token {
		t.Fatalf("sequence at %d after health, want at least %d", n, res.Lease.Token)
	}
	res, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("new"), Owner: "w", TTL: time.Minute, RequestID: "new"})
	wantStatus(t, "acquire of a new key", res, err, protocol.StatusAcquired)
	if res.Lease.Token <= high {
		t.Fatalf("a new key's token %d, want above every issued token (%d) once the sequence is repaired", res.Lease.Token, high)
	}
}

// TestConfigHasNoClock: production code must not be able to make expiry
// follow a client clock (DESIGN: time is the server's).
func TestConfigHasNoClock(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeOf(postgres.Config{})
	clock := reflect.TypeOf(time.Now)
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && f.Type == clock {
			t.Fatalf("postgres.Config.%s is a clock that production code can set", f.Name)
		}
	}
}

// TestSweepKeepsRowsTheSequenceHasNotPassed: a sweep removes a key's row
// only when any later acquire of the key is sure to draw a greater token:
// not while the fencing sequence caches values, nor while it lags behind
// the row's token (a switchover that did not carry it), nor the row of the
// greatest token. The keys are in a
// namespace of the test's own, as in TestSweepStepsTakeBothKindsUpToMax.
func TestSweepKeepsRowsTheSequenceHasNotPassed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	key := keysIn(pgtest.Namespace())
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	for i := range 3 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "w",
			TTL: time.Millisecond, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	time.Sleep(5 * time.Millisecond)
	rows := func() int { return count(t, raw, "SELECT count(*) FROM leasestore_leases") }

	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq CACHE 20")
	if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 0 || rows() != 3 {
		t.Fatalf("sweep under a caching sequence: %+v, %v, %d rows left; want none removed", n, err, rows())
	}
	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq CACHE 1")
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1)") // behind k1 and k2
	if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 1 || rows() != 2 {
		t.Fatalf("sweep under a lagging sequence: %+v, %v, %d rows left; want only k0's row (token 1) removed", n, err, rows())
	}
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 3)")
	if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 1 || rows() != 1 {
		t.Fatalf("sweep once the sequence passed every token: %+v, %v, %d rows left; want k1's row removed and "+
			"k2's kept (the greatest token, see TestSequenceRepairCoversSweptKeys)", n, err, rows())
	}
}

// TestSequenceRepairCoversSweptKeys: once a key's row is swept, its last
// token is kept only by the fencing sequence. After a switchover that did
// not carry the sequence, Health must still move the sequence past it, also
// when the newest audit record carries an older token (a renew of an older
// lease) or none (a prune), so that the key's next acquire gets a greater
// token than any it had. The keys are in a namespace of the test's own (a
// sweep skips a key whose lock another schema's writer holds).
func TestSequenceRepairCoversSweptKeys(t *testing.T) {
	t.Parallel()
	for _, last := range []string{"renew", "prune"} {
		t.Run(last, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			key := keysIn(pgtest.Namespace())
			b := openBackend(t, dsn, nil)
			raw := rawPool(t, dsn)
			held, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Hour,
				RequestID: "a-held"})
			wantStatus(t, "acquire held", held, err, protocol.StatusAcquired)
			gone, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w", TTL: time.Hour,
				RequestID: "a-gone"})
			wantStatus(t, "acquire gone", gone, err, protocol.StatusAcquired)
			res, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("gone"), Owner: "w", Token: gone.Lease.Token,
				RequestID: "r-gone"})
			wantStatus(t, "release gone", res, err, protocol.StatusReleased)
			if _, err := b.Sweep(ctxT(t), 100, 0); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			switch last {
			case "renew":
				res, err = b.Renew(ctxT(t), protocol.RenewRequest{Key: key("held"), Owner: "w", Token: held.Lease.Token,
					TTL: time.Hour, RequestID: "n-held"})
				wantStatus(t, "renew held", res, err, protocol.StatusRenewed)
			case "prune":
				if _, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops",
					RequestID: "prune"}); err != nil {
					t.Fatalf("prune: %v", err)
				}
			}
			// The switchover: the new primary's sequence starts again.
			mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 1, false)")
			if err := b.Health(ctxT(t)); err != nil {
				t.Fatalf("health: %v", err)
			}
			again, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w2", TTL: time.Hour,
				RequestID: "a-gone-again"})
			wantStatus(t, "acquire gone again", again, err, protocol.StatusAcquired)
			if again.Lease.Token <= gone.Lease.Token {
				t.Fatalf("the swept key got token %d after the switchover and health; it had %d before",
					again.Lease.Token, gone.Lease.Token)
			}
		})
	}
}

// A prune whose transaction fails to serialize (SQLSTATE 40001: a
// default_transaction_isolation of serializable, which a transaction
// pooler or a borrowed pool leaves in place) is run again, as every other
// statement is: nothing of the failed transaction stayed. It returned the
// failure, which leasectl reported as an unclassified error (exit 1). The
// failure is injected by a trigger on the prune window, once.
func TestPruneRunsAgainAfterASerializationFailure(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	acquireLapsed(t, b, key, 3)
	mustExec(t, raw, `CREATE SEQUENCE fault_seq`)
	mustExec(t, raw, `CREATE FUNCTION fault_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('fault_seq') = 1 THEN
        RAISE EXCEPTION 'could not serialize access due to read/write dependencies among transactions'
            USING ERRCODE = '40001';
    END IF;
    RETURN NEW;
END $$`)
	mustExec(t, raw, `CREATE TRIGGER fault_once BEFORE INSERT ON leasestore_audit_prune FOR EACH ROW EXECUTE FUNCTION fault_once()`)
	res, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		t.Fatalf("prune after one serialization failure: %v", err)
	}
	if res.Removed != 3 || res.Record.Op != audit.OpPrune {
		t.Fatalf("prune: %+v, want 3 records removed and the prune's record", res)
	}
	if n := count(t, raw, "SELECT last_value FROM fault_seq"); n != 2 {
		t.Fatalf("the window was opened %d times, want twice (the failure, then the run that went through)", n)
	}
}

// TestPruneRefusesACutOffAfterTheServerTime: a prune whose cut-off is
// after the server's clock (which stamps the records) removed the records
// of operations that had just committed, so the retry of an acquire whose
// answer was lost ran again and answered conflict with its own lease
// instead of the replay. It is refused as invalid, naming the server's
// time, and nothing goes.
func TestPruneRefusesACutOffAfterTheServerTime(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	req := protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a1"}
	res, err := b.Acquire(ctxT(t), req)
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	records := count(t, raw, "SELECT count(*) FROM leasestore_audit")
	_, err = b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now().Add(time.Hour), Actor: "ops", RequestID: "prune"})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != protocol.StatusInvalid || !strings.Contains(pe.Message, "store's time") {
		t.Fatalf("prune with a cut-off an hour after the server's time: %v; want invalid naming the store's time", err)
	}
	if n := count(t, raw, "SELECT count(*) FROM leasestore_audit"); n != records {
		t.Fatalf("the refused prune left %d audit records, want %d", n, records)
	}
	again, err := b.Acquire(ctxT(t), req)
	wantStatus(t, "retry of the acquire", again, err, protocol.StatusAcquired)
	if !again.Replayed || again.Lease.Token != res.Lease.Token {
		t.Fatalf("retry of the acquire: replayed=%v token %d, want the replay of token %d", again.Replayed, again.Lease.Token, res.Lease.Token)
	}
}
