package pgbouncer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgbouncer"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// A DSN through the bouncer reaches the schema it was made for, through
// a pooler: the process id the connection was given is not the server's.
func TestDSNReachesTheSchemaThroughThePooler(t *testing.T) {
	t.Parallel()
	b := pgbouncer.Start(t)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, b.DSN(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var schema string
	var pid uint32
	if err := c.QueryRow(ctx, "SELECT current_schema(), pg_backend_pid()").Scan(&schema, &pid); err != nil {
		t.Fatal(err)
	}
	var want string
	d, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if err := d.QueryRow(ctx, "SELECT current_schema()").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if schema != want {
		t.Fatalf("schema %q through the bouncer, want %q", schema, want)
	}
	if pid == c.PgConn().PID() {
		t.Fatalf("the connection was given the server's process id %d: no pooler in between", pid)
	}
}
