package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestOpenRelativeFileURIWithEscapes opens a migrated file whose name
// holds a space through a relative "file:" URI, which escapes it as URIs
// do ("file:a%20b.db"; SQLite decodes %HH in a URI's path). Open's doc:
// path is a file name or a "file:" URI, as for OpenDB; it refuses only a
// missing file. The absolute URI and the plain name open this file; the
// relative URI was refused as a missing store ("no leasestore store at
// a%20b.db"), Open having looked for the file under its escaped name.
// Not parallel: it changes the working directory.
func TestOpenRelativeFileURIWithEscapes(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a b.db"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, path := range []string{"a b.db", "file:" + filepath.ToSlash(filepath.Join(dir, "a%20b.db")), "file:a%20b.db"} {
		b, err := sqlite.Open(ctxT(t), path, nil)
		if err != nil {
			t.Fatalf("Open(%q) of the migrated file %q: %v", path, filepath.Join(dir, "a b.db"), err)
		}
		_ = b.Close(context.Background())
	}
}

// TestRelativeFileURIIsResolvedOnce: a relative "file:" URI names a file
// of the working directory when the *sql.DB is opened. database/sql opens
// connections as it needs them, each from the DSN, so a DSN that kept the
// URI relative would open, after a chdir of the process, another file on
// every new connection (SQLite creating it empty): OpenDB makes the path
// absolute once. Here the pool's idle connections are dropped after the
// chdir, so the acquire runs on a new one, in a directory that holds a
// rel/ of its own. Not parallel: it changes the working directory.
func TestRelativeFileURIIsResolvedOnce(t *testing.T) {
	ctx := ctxT(t)
	first, second := t.TempDir(), t.TempDir()
	for _, d := range []string{first, second} {
		if err := os.Mkdir(filepath.Join(d, "rel"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(first, "rel", "store.db")
	if err := os.WriteFile(want, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(first)
	db, err := sqlite.OpenDB("file:rel/store.db?cache=private")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	t.Chdir(second)
	db.SetMaxIdleConns(0) // the next statement opens a new connection
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "r"})
	other := filepath.Join(second, "rel", "store.db")
	_, statErr := os.Stat(other)
	if err != nil || res.Status != protocol.StatusAcquired || statErr == nil {
		t.Fatalf("acquire on a new connection after a chdir, through OpenDB(\"file:rel/store.db?...\") opened in %s: %q, %v; "+
			"%s exists: %v; want acquired in %s and no file in the new directory", first, res.Status, err, other, statErr == nil, want)
	}
	check, err := sqlite.OpenDB(want)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var n int
	if err := check.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_leases WHERE name = 'k'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the lease in %s: %d rows, %v; want 1", want, n, err)
	}
}
