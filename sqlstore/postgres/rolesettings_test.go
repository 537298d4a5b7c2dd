package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// showSetting reads a setting on a connection of b's pool.
func showSetting(t *testing.T, b *postgres.Backend, name string) string {
	t.Helper()
	var v string
	if err := b.Pool().QueryRow(ctxT(t), "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A role whose sessions get a lock_timeout of 2ms (and an
// idle_in_transaction_session_timeout and idle_session_timeout) gives the
// pools of Open no false timeouts: they pin each to 0, so a renew that
// waits 300 ms for its key's row (locked by another session) answers
// renewed, not timeout within milliseconds (SQLSTATE 55P03).
func TestRoleTimeoutsArePinned(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.RoleDSN(t, dsn, "lock_timeout = 2ms", "idle_in_transaction_session_timeout = 5ms",
		"idle_session_timeout = 250ms") // above a loaded machine's pause between the probe's connect and its query
	probe := rawConn(t, roleDSN)
	var lt string
	if err := probe.QueryRow(ctxT(t), "SELECT current_setting('lock_timeout')").Scan(&lt); err != nil || lt != "2ms" {
		t.Fatalf("the role's sessions have lock_timeout %q (%v), want 2ms: the test would prove nothing", lt, err)
	}
	b := openBackend(t, roleDSN, &postgres.Config{NoCoalescing: true})
	for _, name := range []string{"lock_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout"} {
		if v := showSetting(t, b, name); v != "0" {
			t.Errorf("%s is %q on the pool's connections, want 0", name, v)
		}
	}
	ctx := ctxT(t)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	locker := rawConn(t, dsn)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, `SELECT 1 FROM leasestore_leases WHERE namespace = 'ns' AND name = 'k' FOR UPDATE`)
	unlocked := make(chan struct{})
	var unlockErr error
	go func() {
		defer close(unlocked)
		time.Sleep(300 * time.Millisecond)
		unlockErr = tx.Rollback(context.Background())
	}()
	defer func() { <-unlocked }() // before the connection's cleanup closes it
	start := time.Now()
	res, err = b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, TTL: time.Minute, RequestID: "r2"})
	wantStatus(t, "renew that waited for the row lock", res, err, protocol.StatusRenewed)
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("the renew answered after %s: it did not wait for the row lock (the test would prove nothing)", waited)
	}
	<-unlocked
	if unlockErr != nil {
		t.Fatal(unlockErr)
	}
	time.Sleep(400 * time.Millisecond) // idle past the role's idle_session_timeout
	res, err = b.Get(ctx, protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get after an idle pause", res, err, protocol.StatusFound)
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// A borrowed pool keeps its settings: one whose lock_timeout or
// idle_in_transaction_session_timeout is below the backend's statement
// bound, or whose session_replication_role is replica (the audit trail's
// triggers would not fire), is refused by New naming the setting.
func TestBorrowedPoolSettingsAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ setting, value, want string }{
		{"lock_timeout", "2ms", "lock_timeout is 2ms"},
		{"idle_in_transaction_session_timeout", "1s", "idle_in_transaction_session_timeout is 1s"},
		{"session_replication_role", "replica", "session_replication_role is replica"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			pool := rawPool(t, withServerOption(t, pgtest.MigratedDSN(t), tc.setting, tc.value))
			_, err := postgres.New(ctxT(t), pool, nil)
			if err == nil || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New on a pool with %s = %s: %v, want unavailable naming %q", tc.setting, tc.value, err, tc.want)
			}
		})
	}
	// At or above the bound, a timeout changes nothing the backend answers.
	pool := rawPool(t, withServerOption(t, pgtest.MigratedDSN(t), "lock_timeout", "1min"))
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatalf("New on a pool with lock_timeout = 1min: %v", err)
	}
	_ = b.Close(context.Background())
}

// A role whose sessions are read-only by default (as a replica's DSN given
// by mistake) opens, serves reads, and is reported unhealthy naming why;
// a write answers unavailable saying the connection is read-only.
func TestReadOnlyRoleIsUnhealthy(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	writer := openBackend(t, dsn, nil)
	res, err := writer.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	b := openBackend(t, pgtest.RoleDSN(t, dsn, "default_transaction_read_only = on"), nil)
	res, err = b.Get(ctxT(t), protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get through the read-only role", res, err, protocol.StatusFound)
	err = b.Health(ctxT(t))
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "default_transaction_read_only") {
		t.Fatalf("health through a read-only role: %v, want unavailable naming default_transaction_read_only", err)
	}
	_, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k2"), Owner: "o", TTL: time.Minute, RequestID: "r2"})
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("acquire through a read-only role: %v, want unavailable saying read-only", err)
	}
}

// Grants of TestApplicationRolePrivileges, %s the schema.
const (
	grantTables     = "SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s"
	grantTablesNoDe = "SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %s"
	grantSeqUsage   = "USAGE ON ALL SEQUENCES IN SCHEMA %s"
	grantSeqUpdate  = "USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA %s"
	// grantPruneFuncs: a role that prunes also executes the functions of
	// migration 8 through which a prune claims and frees its request id.
	grantPruneFuncs = "EXECUTE ON FUNCTION %[1]s.leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz), " +
		"%[1]s.leasestore_audit_prune_unclaim(text, text)"
)

// serve runs every serving operation through b, each answering as it
// should, and returns the last token issued.
func serve(t *testing.T, b *postgres.Backend) int64 {
	t.Helper()
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health: %v", err)
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	tok := res.Lease.Token
	res, err = b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "o", Token: tok, TTL: time.Minute, RequestID: "n1"})
	wantStatus(t, "renew", res, err, protocol.StatusRenewed)
	many, err := b.RenewMany(ctxT(t), []protocol.RenewRequest{{Key: key("k"), Owner: "o", Token: tok, TTL: time.Minute, RequestID: "n2"}})
	if err != nil || len(many) != 1 {
		t.Fatalf("renew many: %+v, %v", many, err)
	}
	wantStatus(t, "renew many", many[0], nil, protocol.StatusRenewed)
	res, err = b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g1"})
	wantStatus(t, "get", res, err, protocol.StatusFound)
	if l, err := b.List(ctxT(t), protocol.ListRequest{Namespace: "ns", RequestID: "l1"}); err != nil || len(l.Leases) != 1 {
		t.Fatalf("list: %+v, %v", l, err)
	}
	res, err = b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: tok, RequestID: "r1"})
	wantStatus(t, "release", res, err, protocol.StatusReleased)
	res, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k2"), Owner: "o", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire k2", res, err, protocol.StatusAcquired)
	tok = res.Lease.Token
	res, err = b.Revoke(ctxT(t), protocol.RevokeRequest{Key: key("k2"), Actor: "ops", Reason: "test", RequestID: "v1"})
	wantStatus(t, "revoke", res, err, protocol.StatusRevoked)
	if p, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: "ns"}); err != nil || len(p.Records) != 6 {
		t.Fatalf("audit: %d records, %v; want 6", len(p.Records), err)
	}
	return tok
}

// TestApplicationRolePrivileges runs the backend as a role with the grants
// a DBA commonly gives an application on a schema another role migrated,
// as docs/postgres-settings.md lists them. With only USAGE on the fencing
// sequence, Open failed with a bare "permission denied for sequence
// leasestore_fencing_seq (SQLSTATE 42501)": Health, Open and the sweep
// read the sequence's state with SELECT. Now they read it as USAGE
// allows, and the operations that must move it (fencing raise, the repair
// of a sequence behind the issued tokens) name the GRANT they need.
func TestApplicationRolePrivileges(t *testing.T) {
	t.Parallel()
	wantGrant := func(t *testing.T, what string, err error, grant string) {
		t.Helper()
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), grant) {
			t.Fatalf("%s: %v; want unavailable naming %q", what, err, grant)
		}
	}
	t.Run("DML on the tables and USAGE on the sequence serve, gc and prune", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MigratedDSN(t)
		b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage, grantPruneFuncs), nil)
		serve(t, b)
		if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 1 {
			t.Fatalf("gc: %+v, %v; want k's row removed (k2's holds the greatest token)", n, err)
		}
		if res, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"}); err != nil || res.Removed != 6 {
			t.Fatalf("prune: %+v, %v; want 6 records removed", res, err)
		}
		_, err := b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
		wantGrant(t, "fencing raise", err, "GRANT USAGE, UPDATE ON SEQUENCE leasestore_fencing_seq")
		// A switchover that did not carry the sequence: the repair needs
		// setval, and Health says which grant it lacks.
		mustExec(t, rawConn(t, dsn), "SELECT setval('leasestore_fencing_seq', 1, false)")
		wantGrant(t, "health of a sequence behind the tokens", b.Health(ctxT(t)), "GRANT USAGE, UPDATE ON SEQUENCE leasestore_fencing_seq")
	})
	t.Run("UPDATE on the sequence raises and repairs it", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MigratedDSN(t)
		b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUpdate), nil)
		tok := serve(t, b)
		floor, err := b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
		if err != nil || floor < tok+protocol.MinTokenRaise {
			t.Fatalf("fencing raise: floor %d, %v; want at least %d", floor, err, tok+protocol.MinTokenRaise)
		}
		mustExec(t, rawConn(t, dsn), "SELECT setval('leasestore_fencing_seq', 1, false)")
		if err := b.Health(ctxT(t)); err != nil {
			t.Fatalf("health of a sequence behind the tokens: %v; want it repaired", err)
		}
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k3"), Owner: "o", TTL: time.Minute, RequestID: "a3"})
		wantStatus(t, "acquire after the repair", res, err, protocol.StatusAcquired)
		if res.Lease.Token <= tok {
			t.Fatalf("token %d after the repair, want above %d, the greatest the store holds", res.Lease.Token, tok)
		}
	})
	// fencing raise moves the audit ids too: the era's offset, under a
	// lock of the trail. A role granted less than serving lists (UPDATE on
	// the tables) cannot: the raise says why it needs what it names, and
	// moves neither the ids nor the tokens.
	for _, c := range []struct{ revoke, grant string }{
		{"UPDATE ON TABLE leasestore_audit_era", "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_audit_era TO it"},
		{"UPDATE, DELETE, TRUNCATE ON TABLE leasestore_audit", "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_audit TO it"},
	} {
		t.Run("without "+c.revoke+" fencing raise names the grant and moves nothing", func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			roleDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUpdate)
			u, err := url.Parse(roleDSN)
			if err != nil {
				t.Fatal(err)
			}
			raw := rawConn(t, dsn)
			mustExec(t, raw, "REVOKE "+c.revoke+" FROM "+pgx.Identifier{u.User.Username()}.Sanitize())
			b := openBackend(t, roleDSN, nil)
			serve(t, b)
			seq := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq")
			offset := count(t, raw, "SELECT id_offset FROM leasestore_audit_era")
			_, err = b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
			wantGrant(t, "fencing raise", err, c.grant)
			if !strings.Contains(err.Error(), "fencing raise moves the audit trail's ids too") {
				t.Fatalf("fencing raise: %v; want it to say why it needs the grant", err)
			}
			if now := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq"); now != seq {
				t.Fatalf("the refused raise moved the sequence from %d to %d", seq, now)
			}
			if now := count(t, raw, "SELECT id_offset FROM leasestore_audit_era"); now != offset {
				t.Fatalf("the refused raise moved the era's offset from %d to %d", offset, now)
			}
		})
	}
	// A role given DELETE on the trail after migration 8 (which granted
	// the claim's functions to the roles that held it then) prunes once
	// it may execute them too: until then a prune names that GRANT and
	// removes nothing.
	t.Run("without EXECUTE on the claim's functions prune names the grant", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MigratedDSN(t)
		b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage), nil)
		serve(t, b)
		res, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"})
		wantGrant(t, "prune", err, "GRANT EXECUTE ON FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, "+
			"timestamptz), leasestore_audit_prune_unclaim(text, text) TO it")
		if n := count(t, rawConn(t, dsn), "SELECT count(*) FROM leasestore_audit"); res.Removed != 0 || n != 6 {
			t.Fatalf("the refused prune removed %d records (the trail holds %d of 6), want none", res.Removed, n)
		}
	})
	t.Run("without DELETE the role serves, and gc and prune name the grant", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MigratedDSN(t)
		b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTablesNoDe, grantSeqUsage), nil)
		serve(t, b)
		_, err := b.Sweep(ctxT(t), 100, 0)
		wantGrant(t, "gc", err, "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_leases")
		_, err = b.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"})
		wantGrant(t, "prune", err, "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_audit")
	})
}
