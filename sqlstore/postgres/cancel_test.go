package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A call whose own deadline passes while the server runs its statement
// (leasectl's --timeout, a service's context) has the pool ask the server
// to cancel it, and the server answers query_canceled ("canceling
// statement due to user request"): that answer read "postgres: the server
// cancelled the statement", as if something other than the caller's
// deadline had stopped it. It must read as the caller's timeout, naming
// the deadline and matching context.DeadlineExceeded, whether the call
// reaches the backend through the runtime or directly (leasectl audit
// prune, audit reads), and keep the server's answer as its cause. A
// change waits for its key's row lock; a prune for the prune window of
// another prune.
func TestCallCutByItsDeadlineReadsAsTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		block func(t *testing.T, dsn string)
		call  func(ctx context.Context, b *postgres.Backend, acq protocol.Result) error
	}{
		{"a renew waiting for its key", func(t *testing.T, dsn string) { lockRow(t, dsn, "k") },
			func(ctx context.Context, b *postgres.Backend, acq protocol.Result) error {
				_, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"})
				return err
			}},
		{"a prune waiting for another's window", func(t *testing.T, dsn string) {
			tx, err := rawConn(t, dsn).Begin(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			mustExec(t, tx, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, now())")
		}, func(ctx context.Context, b *postgres.Backend, _ protocol.Result) error {
			_, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, dsn, nil)
			acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
			wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
			c.block(t, dsn)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = c.call(ctx, b, acq)
			wantErrStatus(t, c.name+" cut by its deadline", err, protocol.StatusTimeout)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "57014" {
				t.Fatalf("%s cut by its deadline: %v; want the server's query_canceled (57014) as its cause", c.name, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline passed") ||
				strings.Contains(err.Error(), "server cancelled") {
				t.Fatalf("%s cut by its deadline: %v; want a timeout that says the deadline passed (and matches "+
					"context.DeadlineExceeded), not that the server cancelled the statement", c.name, err)
			}
		})
	}
}

// A statement cancelled on the server by someone else (a DBA's
// pg_cancel_backend) while the caller's deadline is still far off must
// not read as the caller's deadline: it says the server cancelled it, and
// its status is unavailable (the contract's "refused service"), not
// timeout ("the deadline passed first"): no deadline passed. It read
// timeout, which an HTTP client saw as 504 and a holder as its own
// deadline.
func TestServerCancelReadsAsSuch(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b := openBackend(t, dsn, &postgres.Config{ApplicationName: app})
	acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	lockRow(t, dsn, "k")
	done := make(chan error, 1)
	go func() {
		_, err := b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"})
		done <- err
	}()
	mustExec(t, rawConn(t, pgtest.ServerDSN(t)), "SELECT pg_cancel_backend($1)", blockedPID(t, app))
	err = <-done
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("renew cancelled by pg_cancel_backend: %v; want the server's query_canceled (57014) as its cause", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline") ||
		!strings.Contains(err.Error(), "the server cancelled the statement") {
		t.Fatalf("renew cancelled by pg_cancel_backend: %v; want it to say the server cancelled the statement, "+
			"and nothing of a deadline", err)
	}
	wantErrStatus(t, "renew cancelled by pg_cancel_backend", err, protocol.StatusUnavailable)
}

// A statement cut short by the server's statement_timeout (here the
// DSN's, which Open keeps) ran past a deadline, the server's: it answers
// timeout, naming statement_timeout, as docs/postgres-settings.md says,
// and does not read as the caller's own deadline.
func TestStatementTimeoutReadsAsTimeout(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn+"&statement_timeout=200", nil)
	acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	lockRow(t, dsn, "k")
	_, err = b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"})
	wantErrStatus(t, "renew past statement_timeout", err, protocol.StatusTimeout)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "statement_timeout") {
		t.Fatalf("renew past statement_timeout: %v; want the server's query_canceled (57014), naming statement_timeout, "+
			"not the caller's deadline", err)
	}
}
