package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgbouncer"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// A DSN whose role is read-only by default (as a replica's DSN given by
// mistake): `leasectl health` exits 5 naming why, reads still answer, and
// `leasectl serve` on it answers /readyz with 503, its log saying why (and
// writes with 503), not 200 while every write fails.
func TestReadOnlyPostgresIsUnhealthy(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	writer := leasectl{dir: t.TempDir(), dsn: dsn}
	result(t, writer.runJSON(t, 0, "acquire", "k", "--owner", "w"), "acquired")

	roleDSN := pgtest.RoleDSN(t, dsn, "default_transaction_read_only = on")
	c := leasectl{dir: t.TempDir(), dsn: roleDSN}
	h := c.runJSON(t, 5, "health")
	if h["status"] != "unavailable" || !strings.Contains(h["message"].(string), "default_transaction_read_only") {
		t.Fatalf("health on a read-only role: %v, want unavailable naming default_transaction_read_only", h)
	}
	if r := c.run(t, "health"); r.code != 5 || !strings.Contains(r.stderr, "read-only") {
		t.Fatalf("health in table mode on a read-only role:\n%s", r)
	}
	result(t, c.runJSON(t, 0, "get", "k"), "found")

	dir := t.TempDir()
	s := startServe(t, dir, roleDSN, nil, "--tokens", writeTokens(t, dir, e2eTokens))
	call(t, "GET", s.url+"/healthz", "").want(t, "healthz", 200, "ok")
	call(t, "GET", s.url+"/readyz", "").want(t, "readyz on a read-only role", 503, "unavailable")
	// The answer names no connection details; the server's log has the
	// cause (written once the answer went out).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stderr.String(), "default_transaction_read_only"); {
		if time.Now().After(deadline) {
			t.Fatalf("serve's log does not say why the store is not ready:\n%s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	call(t, "POST", s.url+"/v1/acquire", `{"namespace":"e2e","key":"k2","owner":"o","ttl":"1m"}`, bearer(e2eWriter)...).
		want(t, "acquire on a read-only role", 503, "unavailable")
}

// leasectl through PgBouncer in transaction pooling mode: found by itself
// (no DSN parameter), healthy, and acquire, release and a waiting acquire
// (which polls, there being no wake-ups through the pooler) answer as on a
// direct connection.
func TestPostgresThroughPgBouncer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	c := leasectl{dir: t.TempDir(), dsn: pgbouncer.Start(t).DSN(t, dsn)}
	if h := c.runJSON(t, 0, "health"); h["status"] != "healthy" {
		t.Fatalf("health through PgBouncer: %v", h)
	}
	l := result(t, c.runJSON(t, 0, "acquire", "k", "--owner", "w1", "--ttl", "1m"), "acquired")
	waiter := c.command(context.Background(), "acquire", "k", "--owner", "w2", "--wait", "--wait-timeout", "30s", "-o", "json")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	result(t, c.runJSON(t, 0, "release", "k", "--owner", "w1", "--token", fmt.Sprint(l["token"])), "released")
	r := finish(t, waiter, waiter.Args[1:], waiter.Wait())
	if r.code != 0 {
		t.Fatalf("waiting acquire through PgBouncer:\n%s", r)
	}
	result(t, r.obj(t), "acquired")
}

// migrate refuses a DSN that goes through a pooler (pooler=transaction),
// saying to run migrations on a direct connection, instead of passing the
// parameter to the server (which refused it as an unknown setting).
func TestMigrateRefusesPoolerDSN(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: pgtest.DSN(t) + "&pooler=transaction"}
	r := c.run(t, "migrate", "up")
	if r.code != 2 || !strings.Contains(r.stderr, "direct connection") {
		t.Fatalf("migrate up through a pooler DSN:\n%s", r)
	}
}

// migrate finds a pooler that does not keep sessions as the other commands
// do, by the server process id, and refuses it as it refuses
// pooler=transaction, writing nothing. It went through it and failed with
// an error naming neither the pooler nor the fix (`prepared statement
// "stmtcache_..." already exists`), and where it got further it would
// have left goose's session lock on a server connection others use.
func TestMigrateRefusesDetectedPooler(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	c := leasectl{dir: t.TempDir(), dsn: pgbouncer.Start(t).DSN(t, dsn)}
	r := c.run(t, "migrate", "up")
	if r.code != 2 || !strings.Contains(r.stderr, "direct connection") {
		t.Fatalf("migrate up through PgBouncer (no pooler parameter):\n%s", r)
	}
	direct := leasectl{dir: t.TempDir(), dsn: dsn}
	if st := direct.runJSON(t, 0, "migrate", "status"); st["version"] != float64(0) {
		t.Fatalf("migrate status after the refusal: %v, want nothing applied", st)
	}
}

// pooler=session says sessions are kept (a direct connection, or a pooler
// in session mode), so migrate runs through it, as every other command
// does; it was refused as if the pooler kept none.
func TestMigrateThroughSessionPoolerDSN(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: pgtest.DSN(t) + "&pooler=session"}
	c.runJSON(t, 0, "migrate", "up")
	if st := c.runJSON(t, 0, "migrate", "status"); st["version"] != float64(migrations.LatestVersion) {
		t.Fatalf("migrate status with pooler=session: %v", st)
	}
	if h := c.runJSON(t, 0, "health"); h["status"] != "healthy" {
		t.Fatalf("health with pooler=session after migrate up: %v", h)
	}
}
