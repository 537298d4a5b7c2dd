package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// schemaOf returns the current schema of dsn's connections.
func schemaOf(t testing.TB, dsn string) string {
	t.Helper()
	var s string
	if err := rawConn(t, dsn).QueryRow(ctxT(t), "SELECT current_schema()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenRefusesAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	schema := schemaOf(t, dsn)
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: opened an unmigrated schema", what)
		}
		if protocol.StatusOf(err) != protocol.StatusUnavailable {
			t.Fatalf("%s: status %q, want unavailable: %v", what, protocol.StatusOf(err), err)
		}
		for _, s := range []string{want, schema} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: error %q does not mention %q", what, err, s)
			}
		}
	}
	_, err := postgres.Open(ctxT(t), dsn, nil)
	check("open, no schema", err, "leasectl migrate up")
	pool := rawPool(t, dsn)
	_, err = postgres.New(ctxT(t), pool, nil)
	check("new, no schema", err, "leasectl migrate up")

	// Migrated, then rolled back: the version table exists at version 0.
	if err := pgtest.Migrate(ctxT(t), dsn); err != nil {
		t.Fatal(err)
	}
	openOK(t, dsn)
	db := sqlDB(t, dsn)
	if _, err := migrations.Down(ctxT(t), migrations.Postgres, db); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctxT(t), dsn, nil)
	check("open after down", err, "leasectl migrate up")

	// A schema newer than this release.
	if err := pgtest.Migrate(ctxT(t), dsn); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, "INSERT INTO leasestore_goose_db_version (version_id, is_applied) VALUES ($1, true)",
		migrations.LatestVersion+1)
	// It declares that this release can serve it (a rolling deploy).
	openOK(t, dsn)
	// It declares that only newer releases can.
	mustExec(t, pool, "UPDATE leasestore_compat SET oldest_serving_version = $1", migrations.LatestVersion+1)
	_, err = postgres.Open(ctxT(t), dsn, nil)
	check("open a newer schema", err, "upgrade leasestore")
}

func openOK(t testing.TB, dsn string) {
	t.Helper()
	b, err := postgres.Open(ctxT(t), dsn, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_ = b.Close(context.Background())
}

// sqlDB opens a database/sql handle on dsn, as goose needs.
func sqlDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	pool := rawPool(t, dsn)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-Passw0rd"
	for _, tc := range []struct {
		name, dsn string
		status    protocol.Status
	}{
		{"unreachable url", "postgres://someone:" + pw + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", protocol.StatusUnavailable},
		{"unreachable key=value", "host=127.0.0.1 port=1 user=someone password=" + pw + " dbname=db sslmode=disable connect_timeout=5", protocol.StatusUnavailable},
		{"unparsable url", "postgres://someone:" + pw + "@127.0.0.1:5432/db?pool_max_conns=many", protocol.StatusInvalid},
		{"unparsable key=value", "host=127.0.0.1 user=someone password=" + pw + " pool_max_conns=many", protocol.StatusInvalid},
		{"bad port", "postgres://someone:" + pw + "@127.0.0.1:notaport/db", protocol.StatusInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := postgres.Open(ctxT(t), tc.dsn, nil)
			if err == nil {
				_ = b.Close(context.Background())
				t.Fatal("open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error shows the password: %v", err)
			}
			if got := protocol.StatusOf(err); got != tc.status {
				t.Fatalf("status %q, want %q: %v", got, tc.status, err)
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestCloseClosesAnOwnedPool(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b, err := postgres.Open(ctxT(t), dsn, &postgres.Config{ApplicationName: app, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g"}); err != nil {
		t.Fatal(err)
	}
	observer := rawConn(t, pgtest.ServerDSN(t))
	const q = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
	if n := count(t, observer, q, app); n < 1 {
		t.Fatalf("%d connections named %q before close, want at least 1", n, app)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatalf("second close: %v", err)
	}
	// The pool has sent Terminate on every connection when Close returns;
	// the server removes a backend from pg_stat_activity when its process
	// exits, which happens just after. Poll for that, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := count(t, observer, q, app)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections named %q remain after close", n, app)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Closed, not unavailable: nothing was sent, as on the SQLite and etcd
	// backends and as Close's doc says (the contract case
	// Lifecycle/closed_backend_answers_closed).
	_, err = b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g2"})
	wantErrStatus(t, "get after close", err, protocol.StatusClosed)
}

func TestDefaultApplicationName(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	var name string
	if err := b.Pool().QueryRow(ctxT(t), "SHOW application_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != postgres.DefaultApplicationName {
		t.Fatalf("application_name %q, want %q", name, postgres.DefaultApplicationName)
	}
	// The DSN's own name is kept when the config sets none.
	b2 := openBackend(t, dsn+"&application_name=from-dsn", nil)
	if err := b2.Pool().QueryRow(ctxT(t), "SHOW application_name").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "from-dsn" {
		t.Fatalf("application_name %q, want the DSN's %q", name, "from-dsn")
	}
	if got := b2.Pool().Config().MaxConns; got < 1 {
		t.Fatalf("max conns %d", got)
	}
	b3 := openBackend(t, dsn+"&pool_max_conns=3", nil)
	if got := b3.Pool().Config().MaxConns; got != 3 {
		t.Fatalf("max conns %d, want the DSN's 3", got)
	}
	b4 := openBackend(t, dsn+"&pool_max_conns=3", &postgres.Config{MaxConns: 5})
	if got := b4.Pool().Config().MaxConns; got != 5 {
		t.Fatalf("max conns %d, want the config's 5", got)
	}
}

func TestCloseLeavesABorrowedPoolOpen(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	pool := rawPool(t, dsn)
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctxT(t)); err != nil {
		t.Fatalf("the borrowed pool was closed: %v", err)
	}
	if n := count(t, pool, "SELECT count(*) FROM leasestore_leases"); n != 1 {
		t.Fatalf("%d leases, want 1", n)
	}
	// A new backend on the same pool works.
	b2, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = b2.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g"})
	wantStatus(t, "get", res, err, protocol.StatusFound)
	if _, err := postgres.New(ctxT(t), nil, nil); err == nil {
		t.Fatal("New accepted a nil pool")
	}
	// Settings of the pool Open makes are refused, not ignored.
	for _, cfg := range []*postgres.Config{{ApplicationName: "svc"}, {MaxConns: 3}} {
		if _, err := postgres.New(ctxT(t), pool, cfg); err == nil || !strings.Contains(err.Error(), "set application_name and pool_max_conns on it") {
			t.Fatalf("New with %+v: %v, want a refusal naming the fix", *cfg, err)
		}
	}
}

func TestObjectsLiveInTheSearchPathSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	schema := schemaOf(t, dsn)
	if schema == "public" || !strings.HasPrefix(schema, "lstest_") {
		t.Fatalf("current schema %q, want the test's own", schema)
	}
	c := rawConn(t, pgtest.ServerDSN(t))
	for _, obj := range []string{"leasestore_leases", "leasestore_audit", "leasestore_fencing_seq", migrations.VersionTable} {
		var where []string
		rows, err := c.Query(ctxT(t), `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relname = $1 AND n.nspname IN ($2, 'public')`, obj, schema)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			where = append(where, s)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if len(where) == 0 || !contains(where, schema) {
			t.Fatalf("%s is in %v, want %s", obj, where, schema)
		}
	}
	// And the backend uses them: a lease lands in the schema's table.
	b := openBackend(t, dsn, nil)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("here"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	if n := count(t, c, "SELECT count(*) FROM "+schema+".leasestore_leases WHERE name = 'here'"); n != 1 {
		t.Fatalf("%d rows in %s.leasestore_leases, want 1", n, schema)
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := openBackend(t, pgtest.MigratedDSN(t), nil)
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Health(ctx)
	wantErrStatus(t, "health with a cancelled context", err, protocol.StatusTimeout)
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("%v does not match ErrTimeout", err)
	}
	_ = b.Close(context.Background())
	wantErrStatus(t, "health after close", b.Health(ctxT(t)), protocol.StatusClosed)
}

// Health refuses a schema this release cannot serve, as Open does, naming
// both versions: one rolled back beneath a running service (migrate down
// before its binaries) made every write fail (column "lock_delay" does not
// exist) while health said healthy.
func TestHealthRefusesASchemaItCannotServe(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Down(ctxT(t), migrations.Postgres, sqlDB(t, dsn)); err != nil {
		t.Fatal(err)
	}
	wantRefused := func(what, want string) {
		t.Helper()
		err := b.Health(ctxT(t))
		wantErrStatus(t, "health "+what, err, protocol.StatusUnavailable)
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("health %s: %q does not say %q", what, err, want)
		}
	}
	wantRefused("after migrate down", fmt.Sprintf("version %d, this release needs %d", migrations.LatestVersion-1, migrations.LatestVersion))
	// Below version 2 the tables Health reads are gone; it still names the
	// versions and the fix rather than the missing relation.
	for v := migrations.LatestVersion - 1; v > 1; v-- {
		if _, err := migrations.Down(ctxT(t), migrations.Postgres, sqlDB(t, dsn)); err != nil {
			t.Fatal(err)
		}
	}
	wantRefused("at version 1", fmt.Sprintf("version 1, this release needs %d: run `leasectl migrate up`", migrations.LatestVersion))
	if _, err := migrations.Down(ctxT(t), migrations.Postgres, sqlDB(t, dsn)); err != nil {
		t.Fatal(err)
	}
	wantRefused("with every migration rolled back", "has no leasestore schema: run `leasectl migrate up`")
}

// A release already serving reads the schema's version only at Health, so
// a migration that stops it from serving (raising leasestore_compat's
// oldest_serving_version) adds a serving guard that refuses its writes
// (migrations.ServingGuardPrefix): every change answers unavailable,
// naming the upgrade, and writes nothing; reads go on.
func TestServingGuardRefusesARunningOlderRelease(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	pool := rawPool(t, dsn)
	b := openBackend(t, dsn, nil)
	ctx := ctxT(t)
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "o", TTL: time.Minute, RequestID: "held"})
	wantStatus(t, "acquire before the migration", held, err, protocol.StatusAcquired)

	// What a migration to version LatestVersion+1 that only later
	// releases serve would do, their leases and records being of format
	// version 99.
	mustExec(t, pool, "INSERT INTO leasestore_goose_db_version (version_id, is_applied) VALUES ($1, true)",
		migrations.LatestVersion+1)
	mustExec(t, pool, "UPDATE leasestore_compat SET oldest_serving_version = $1", migrations.LatestVersion+1)
	mustExec(t, pool, "ALTER TABLE leasestore_leases ADD CONSTRAINT "+migrations.ServingGuardPrefix+"_leases CHECK (version >= 99) NOT VALID")
	mustExec(t, pool, "ALTER TABLE leasestore_audit ADD CONSTRAINT "+migrations.ServingGuardPrefix+"_audit CHECK (version >= 99) NOT VALID")

	records := count(t, pool, "SELECT count(*) FROM leasestore_audit")
	_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("new"), Owner: "o", TTL: time.Minute, RequestID: "new"})
	wantGuard(t, "acquire", err)
	_, err = b.Renew(ctx, protocol.RenewRequest{Key: key("held"), Owner: "o", Token: held.Lease.Token, TTL: time.Minute, RequestID: "renew"})
	wantGuard(t, "renew", err)
	_, err = b.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "o", Token: held.Lease.Token, RequestID: "release"})
	wantGuard(t, "release", err)
	if n := count(t, pool, "SELECT count(*) FROM leasestore_audit"); n != records {
		t.Fatalf("the refused changes wrote %d audit records", n-records)
	}
	if n := count(t, pool, "SELECT count(*) FROM leasestore_leases WHERE name = 'new'"); n != 0 {
		t.Fatal("the refused acquire wrote its row")
	}
	got, err := b.Get(ctx, protocol.GetRequest{Key: key("held"), RequestID: "get"})
	wantStatus(t, "get", got, err, protocol.StatusFound)
	if got.Lease.Token != held.Lease.Token || !got.Lease.ExpiresAt.Equal(held.Lease.ExpiresAt) {
		t.Fatalf("get: %+v, want the lease as acquired before the migration", got.Lease)
	}
}

func wantGuard(t *testing.T, what string, err error) {
	t.Helper()
	wantErrStatus(t, what, err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "migrated past what this release serves") || !strings.Contains(err.Error(), "upgrade leasestore") {
		t.Fatalf("%s: %v, want it to say the schema moved past this release and name the upgrade", what, err)
	}
}
