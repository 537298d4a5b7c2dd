package main

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
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
