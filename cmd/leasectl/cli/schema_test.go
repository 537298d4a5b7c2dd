package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// The README's advice, followed literally: migrate up with a search_path
// naming a schema that does not exist yet creates the schema (the
// operator's own) and migrates into it; the store then works.
func TestMigrateUpCreatesTheSearchPathSchema(t *testing.T) {
	t.Parallel()
	server := pgtest.ServerDSN(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "lsnew_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	dsn, err := pgtest.WithSearchPath(server, schema)
	if err != nil {
		t.Fatal(err)
	}
	e := env{EnvDSN: dsn}
	up := runCLI(t, e, "migrate", "up")
	wantCode(t, up, ExitOK)
	if !strings.Contains(up.stderr, "created schema") || !strings.Contains(up.stderr, schema) {
		t.Errorf("migrate up should say it created schema %s; stderr:\n%s", schema, up.stderr)
	}
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	again := runCLI(t, e, "migrate", "up")
	wantCode(t, again, ExitOK)
	if strings.Contains(again.stderr, "created schema") {
		t.Errorf("second migrate up created the schema again:\n%s", again.stderr)
	}
}

func TestFirstSchema(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`leasestore`:                "leasestore",
		`"$user", public`:           "public",
		`"$user",leasestore,public`: "leasestore",
		`LeaseStore`:                "leasestore",
		`"Lease ""Store""", public`: `Lease "Store"`,
		` "a,b" , c`:                "a,b",
		`"$user"`:                   "",
		``:                          "",
	}
	for in, want := range cases {
		if got := firstSchema(in); got != want {
			t.Errorf("firstSchema(%q) = %q, want %q", in, got, want)
		}
	}
}
