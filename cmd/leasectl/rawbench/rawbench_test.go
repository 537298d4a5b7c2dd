package rawbench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, pgtest.LeakOptions()...)
}

// exercise checks the baseline's outcomes: a free key is taken with a
// greater token each time, a live one is refused, a release needs the
// owner and token of the live lease, and an expired lease can be taken.
func exercise(t *testing.T, r Baseline) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, ok, err := r.Acquire(ctx, "k", "a", time.Minute)
	if err != nil || !ok || tok < 1 {
		t.Fatalf("acquire free key: %d %v %v", tok, ok, err)
	}
	if _, ok, err := r.Acquire(ctx, "k", "b", time.Minute); err != nil || ok {
		t.Fatalf("acquire held key: ok=%v err=%v, want refused", ok, err)
	}
	if ok, err := r.Release(ctx, "k", "b", tok); err != nil || ok {
		t.Fatalf("release by another owner: ok=%v err=%v", ok, err)
	}
	if ok, err := r.Release(ctx, "k", "a", tok+1); err != nil || ok {
		t.Fatalf("release with another token: ok=%v err=%v", ok, err)
	}
	if ok, err := r.Release(ctx, "k", "a", tok); err != nil || !ok {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	tok2, ok, err := r.Acquire(ctx, "k", "b", time.Millisecond)
	if err != nil || !ok || tok2 <= tok {
		t.Fatalf("re-acquire: %d (after %d) %v %v", tok2, tok, ok, err)
	}
	time.Sleep(5 * time.Millisecond)
	if tok3, ok, err := r.Acquire(ctx, "k", "c", time.Minute); err != nil || !ok || tok3 <= tok2 {
		t.Fatalf("acquire expired: %d %v %v", tok3, ok, err)
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, r)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
	if _, err := OpenSQLite(context.Background(), filepath.Join(dir, "missing", "dir")); err == nil {
		t.Fatal("a missing directory was accepted")
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	r, err := OpenPostgres(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, r)
	var n int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM raw_audit`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("audit records: %d %v, want 4 (three acquires, one release)", n, err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, r.Schema()).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s left: %v %v", r.Schema(), exists, err)
	}
	if _, err := OpenPostgres(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", 1); err == nil {
		t.Fatal("an unreachable server was accepted")
	}
}
