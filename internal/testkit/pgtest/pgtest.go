// Package pgtest gives tests of any leasestore package a PostgreSQL to run
// against: each call of [DSN] or [MigratedDSN] creates a fresh, empty schema
// and returns a DSN whose search_path is that schema, so tests are isolated
// from each other and may run in parallel. The schema is dropped (CASCADE)
// in t.Cleanup.
//
// The server comes from the environment variable LEASESTORE_TEST_POSTGRES_DSN
// ([EnvDSN]). When it is unset and a Docker engine answers, one PostgreSQL 15
// container is started with testcontainers-go for the whole test binary
// (testcontainers' reaper removes it when the binary exits). Otherwise the
// test is skipped with a message saying how to provide a server, except
// when the environment variable CI is set: then a missing PostgreSQL fails
// the test, so that CI never passes by skipping.
//
// pgtest is for tests only; it imports testing. Its functions are safe for
// concurrent use by parallel tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/migrations"
)

// EnvDSN names the environment variable holding the test server's DSN, for
// example postgres://root@127.0.0.1:5432/test?sslmode=disable. The role needs
// the right to create schemas in that database.
const EnvDSN = "LEASESTORE_TEST_POSTGRES_DSN"

// ContainerImage is the image started when [EnvDSN] is unset and Docker
// answers.
const ContainerImage = "postgres:15-alpine"

const howTo = "set " + EnvDSN + " to a PostgreSQL DSN (for example postgres://root@127.0.0.1:5432/test?sslmode=disable), " +
	"or run `make db-up` and set " + EnvDSN + "=postgres://leasestore:leasestore@127.0.0.1:5432/leasestore?sslmode=disable, " +
	"or start a Docker engine so that testcontainers can run " + ContainerImage

var (
	containerOnce sync.Once
	containerDSN  string
	containerErr  error
)

// ServerDSN returns the DSN of the test server itself (no schema of its
// own): [EnvDSN], else the container's. Without a server it skips t, or
// fails it when CI is set.
func ServerDSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	containerOnce.Do(startContainer)
	if containerDSN != "" {
		return containerDSN
	}
	msg := fmt.Sprintf("pgtest: no PostgreSQL for this test (%v): %s", containerErr, howTo)
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so a missing PostgreSQL is a failure)")
	}
	t.Skip(msg)
	return ""
}

// startContainer starts the one container of this test binary, if a Docker
// engine answers. It records why not in containerErr.
func startContainer() {
	defer func() {
		// testcontainers panics in some set-ups without Docker.
		if r := recover(); r != nil {
			containerErr = fmt.Errorf("docker: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		containerErr = fmt.Errorf("no docker engine: %w", err)
		return
	}
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	if err := provider.Health(hctx); err != nil { // Health closes the provider
		containerErr = fmt.Errorf("no docker engine answers: %w", err)
		return
	}
	c, err := tcpostgres.Run(ctx, ContainerImage,
		tcpostgres.WithDatabase("leasestore"),
		tcpostgres.WithUsername("leasestore"),
		tcpostgres.WithPassword("leasestore"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		containerErr = fmt.Errorf("start %s: %w", ContainerImage, err)
		return
	}
	dsn, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		containerErr = fmt.Errorf("container dsn: %w", err)
		return
	}
	containerDSN = dsn
}

// LeakOptions returns the goleak options that a TestMain using pgtest
// passes to goleak.VerifyTestMain: they ignore the goroutines that
// testcontainers keeps until the test binary exits (the reaper's connection
// and the Docker client's idle HTTP connections) when the container path
// was taken. Without a container nothing is ignored beyond those functions.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
}

// DSN creates a fresh, empty schema on the test server and returns a DSN
// whose connections use it as search_path (through the options parameter,
// so every pooled connection does). The schema is dropped in t.Cleanup,
// after the cleanups registered later (so close pools with t.Cleanup after
// calling DSN, or before the test returns).
func DSN(t testing.TB) string {
	t.Helper()
	server := ServerDSN(t)
	schema := "lstest_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, server, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, server, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, err := WithSearchPath(server, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Namespace returns a leasestore namespace that no other test uses ("t-"
// and 8 random hex digits). A fresh schema does not isolate key names: a
// key's writer lock is an advisory lock of the database, shared by every
// schema, and a sweep, gc or coalesced batch tries it and skips a key
// another test holds. A test whose assertions count on finding its keys'
// locks free (removed rows, batch members) puts its keys here.
func Namespace() string { return "t-" + randomHex(4) }

// MissingSchemaDSN returns a DSN whose search_path names a schema that does
// not exist yet (as an operator's first DSN for leasestore does), and that
// schema's name. Whatever creates it, the schema is dropped in t.Cleanup.
func MissingSchemaDSN(t testing.TB) (dsn, schema string) {
	t.Helper()
	server := ServerDSN(t)
	schema = "lsnew_" + randomHex(8)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, server, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, err := WithSearchPath(server, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn, schema
}

// MigratedDSN is [DSN] with leasestore's migrations applied to the schema.
func MigratedDSN(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Migrate(ctx, dsn); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Migrate applies leasestore's migrations to the schema of dsn.
func Migrate(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("parse dsn: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
		return err
	}
	return nil
}

// WithSearchPath returns dsn with its connections' search_path set to
// schema, through the options startup parameter (appended to any options
// the DSN already has). It accepts both URL and key=value DSNs. schema must
// be a plain identifier (lowercase letters, digits, underscores).
func WithSearchPath(dsn, schema string) (string, error) {
	for _, c := range schema {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return "", fmt.Errorf("search path: %q is not a plain identifier", schema)
		}
	}
	opt := "-c search_path=" + schema
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("search path: the dsn is not a valid URL")
		}
		q := u.Query()
		if old := q.Get("options"); old != "" {
			opt = old + " " + opt
		}
		q.Set("options", opt)
		// Encode writes spaces as "+", which pgx does not decode: use %20
		// (a literal "+" is already escaped as %2B).
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), nil
	}
	if strings.Contains(dsn, "options=") {
		return "", fmt.Errorf("search path: a key=value dsn that sets options is not supported")
	}
	return dsn + " options='" + opt + "'", nil
}

// admin is the connection through which this test binary creates and
// drops schemas: one for the binary, not one per statement, because a new
// server session costs the server tens of milliseconds of CPU (a fork,
// caches to fill) and the suite makes hundreds of schemas. The mutex
// serialises its use by parallel tests. It has no goroutines of its own
// and is closed when the binary exits.
var admin struct {
	mu   sync.Mutex
	dsn  string
	conn *pgx.Conn
}

// exec runs one statement on the admin connection to dsn, connecting (again)
// when there is none or it no longer answers a ping, as after a test that
// terminated server sessions.
func exec(ctx context.Context, dsn, sql string) error {
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.conn != nil && (admin.dsn != dsn || admin.conn.Ping(ctx) != nil) {
		_ = admin.conn.Close(ctx)
		admin.conn = nil
	}
	if admin.conn == nil {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		admin.conn, admin.dsn = conn, dsn
	}
	_, err := admin.conn.Exec(ctx, sql)
	return err
}

// query runs one single-row query on a connection of its own.
func query(t testing.TB, dsn, sql string, dest ...any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RoleDSN creates a login role that may use the schema of dsn (a DSN from
// [DSN] or [MigratedDSN]), applies each "name = value" of settings to it
// with ALTER ROLE ... SET, as a DBA would, and returns dsn logging in as
// that role. The role is dropped (its sessions ended first) in t.Cleanup,
// after the cleanups registered later: close pools on it there or before
// the test returns. The server must let the role log in without a
// password (trust, as on the project's machines).
func RoleDSN(t testing.TB, dsn string, settings ...string) string {
	t.Helper()
	return roleDSN(t, dsn, []string{"USAGE, CREATE ON SCHEMA %s", "ALL ON ALL TABLES IN SCHEMA %s",
		"ALL ON ALL SEQUENCES IN SCHEMA %s"}, settings)
}

// GrantedRoleDSN is [RoleDSN] with the grants a DBA chose instead of all
// privileges: each is what follows GRANT up to TO, %s standing for the
// schema ("SELECT, INSERT ON ALL TABLES IN SCHEMA %s"). The role also gets
// USAGE on the schema, nothing else.
func GrantedRoleDSN(t testing.TB, dsn string, grants ...string) string {
	t.Helper()
	return roleDSN(t, dsn, append([]string{"USAGE ON SCHEMA %s"}, grants...), nil)
}

func roleDSN(t testing.TB, dsn string, grants, settings []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: role: %v", err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatalf("pgtest: role: %v", err)
	}
	role := "lstest_role_" + randomHex(8)
	r, s := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+r+" LOGIN"); err != nil {
		t.Fatalf("pgtest: create role: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{
			"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '" + role + "'",
			"DROP OWNED BY " + r, "DROP ROLE " + r,
		} {
			if err := exec(ctx, ServerDSN(t), q); err != nil {
				t.Errorf("pgtest: drop role %s: %v", role, err)
				return
			}
		}
	})
	var qs []string
	for _, g := range grants {
		qs = append(qs, "GRANT "+fmt.Sprintf(g, s)+" TO "+r)
	}
	for _, kv := range settings {
		name, value, _ := strings.Cut(kv, "=")
		qs = append(qs, "ALTER ROLE "+r+" SET "+strings.TrimSpace(name)+" = '"+strings.ReplaceAll(strings.TrimSpace(value), "'", "''")+"'")
	}
	for _, q := range qs {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("pgtest: role: %s: %v", q, err)
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: role: the dsn is not a URL")
	}
	u.User = url.User(role)
	return u.String()
}
