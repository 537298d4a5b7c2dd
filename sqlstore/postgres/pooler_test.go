package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgbouncer"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// poolerGroups are the contract suite's groups run through PgBouncer, for
// each way of waiting (woken through Config.ListenDSN, or polling): the
// waits, and (once) the concurrent cases, which coalesce on a direct
// connection. Each case migrates a schema of its own (most of its time),
// so the suite's other groups, which a pooler changes nothing for, stay
// on TestContract.
var poolerGroups = map[string][]string{"listen_dsn": {"/Wait/", "/Contention/"}, "polling": {"/Wait/"}}

// pollingBackend is a backend without protocol.Notifier (or the other
// optional interfaces), as the suite sees a store that cannot signal: its
// waits re-check every few milliseconds.
type pollingBackend struct {
	protocol.Backend
	audit.Reader
}

// The contract suite's wait and concurrency cases pass through PgBouncer
// in transaction pooling mode, which the backend detects by itself: with
// Config.ListenDSN a direct connection wakes waiters, without one they
// poll (see poolerGroups).
func TestContractThroughTransactionPooler(t *testing.T) {
	t.Parallel()
	bouncer := pgbouncer.Start(t)
	for _, tc := range []struct {
		name   string
		listen bool
	}{{"listen_dsn", true}, {"polling", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
				if !containsAny(t.Name()+"/", poolerGroups[tc.name]) {
					t.Skip("not among the cases run through the pooler")
				}
				dsn := pgtest.MigratedDSN(t)
				via := bouncer.DSN(t, dsn)
				open := func() *postgres.Backend {
					cfg := &postgres.Config{MaxConns: 4}
					if tc.listen {
						cfg.ListenDSN = dsn
					}
					b, err := postgres.Open(context.Background(), via, postgres.WithTestClock(cfg, clock.Now))
					if err != nil {
						t.Fatalf("open through the pooler: %v", err)
					}
					t.Cleanup(func() { _ = b.Close(context.Background()) })
					if !postgres.Pooled(b) {
						t.Fatal("the backend did not find the pooler")
					}
					return b
				}
				first, second := open(), open()
				if tc.listen {
					return contract.Harness{Backend: first, Second: second, Audit: first}
				}
				return contract.Harness{Backend: pollingBackend{first, first}, Second: pollingBackend{second, second}, Audit: first}
			})
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Behind a transaction pooler the backend leaves no session state on the
// server connections that other clients share: after concurrent acquires,
// renewals and releases (which coalesce on a direct connection) and a
// wait, the pooler's server connections hold no temporary batch function
// and no session advisory lock (the waiters' registry, taken with LISTEN),
// and a waiter without Config.ListenDSN is told it must poll, and is woken
// by polling.
func TestTransactionPoolerKeepsNoSessionState(t *testing.T) {
	t.Parallel()
	bouncer := pgbouncer.Start(t)
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.RoleDSN(t, dsn)
	var role string
	if err := rawConn(t, roleDSN).QueryRow(ctxT(t), "SELECT current_user").Scan(&role); err != nil {
		t.Fatal(err)
	}
	via := bouncer.DSN(t, roleDSN) // its server connections log in as role
	b := openBackend(t, via, &postgres.Config{MaxInFlight: 1})
	if !postgres.Pooled(b) {
		t.Fatal("the backend did not find the pooler")
	}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())

	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			k := key("k" + string(rune('a'+g%4)))
			for range 10 {
				res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute})
				if errors.Is(err, protocol.ErrConflict) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if _, err := rt.RenewMany(ctx, []protocol.RenewRequest{{Key: k, Owner: "o", Token: res.Lease.Token, TTL: time.Minute}}); err != nil {
					errs <- err
					return
				}
				if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("through the pooler: %v", err)
	}

	// A wait: Subscribe says waiters poll, and the waiter is woken by
	// polling once the holder releases.
	if _, _, err := b.Subscribe(ctx, key("w")); !errors.Is(err, protocol.ErrUnavailable) ||
		!strings.Contains(err.Error(), "ListenDSN") {
		t.Fatalf("subscribe through the pooler: %v, want unavailable naming Config.ListenDSN", err)
	}
	held, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("w"), Owner: "holder", TTL: time.Minute})
	wantStatus(t, "acquire", held, err, protocol.StatusAcquired)
	done := make(chan error, 1)
	go func() {
		res, err := protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: key("w"), Owner: "waiter", TTL: time.Minute},
			&protocol.WaitConfig{Recheck: 50 * time.Millisecond})
		if err == nil && res.Status != protocol.StatusAcquired {
			err = errors.New("waiter: " + string(res.Status))
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key("w"), Owner: "holder", Token: held.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// New finds the pooler in front of a borrowed pool too (one that
	// prepares no named statements, as pgx's documentation asks for a
	// transaction pooler).
	pcfg, err := pgxpool.ParseConfig(via)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	nb, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatalf("new on a pool through the pooler: %v", err)
	}
	defer nb.Close(context.Background())
	if !postgres.Pooled(nb) {
		t.Fatal("New did not find the pooler in front of the borrowed pool")
	}

	admin := rawConn(t, dsn)
	if n := count(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role); n == 0 {
		t.Fatalf("no server connection of role %s: the pooler's connections cannot be inspected", role)
	}
	if n := count(t, admin, `SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
		WHERE p.proname = 'leasestore_change_batch' AND r.rolname = $1`, role); n != 0 {
		t.Errorf("%d temporary batch functions on the pooler's server connections, want none", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND a.usename = $1`, role); n != 0 {
		t.Errorf("%d advisory locks held by the pooler's server connections, want none", n)
	}
}

// The pooler mode can be given in the DSN (pooler=transaction, or
// session), and a value it does not know is refused before connecting.
func TestPoolerDSNParameter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn+"&pooler=transaction", nil)
	if !postgres.Pooled(b) {
		t.Fatal("pooler=transaction: the backend does not run as behind a pooler")
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	if postgres.Pooled(openBackend(t, dsn+"&pooler=session", nil)) {
		t.Fatal("pooler=session: the backend runs as behind a pooler")
	}
	if postgres.Pooled(openBackend(t, dsn, nil)) {
		t.Fatal("a direct connection was taken for a pooler")
	}
	_, err = postgres.Open(ctxT(t), dsn+"&pooler=statement-ish", nil)
	if !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "pooler") {
		t.Fatalf("pooler=statement-ish: %v, want invalid naming the parameter", err)
	}
}
