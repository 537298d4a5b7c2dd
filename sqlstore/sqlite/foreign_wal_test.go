package sqlite_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Open and CheckFirstUse refuse another application's database without
// writing to it, also one in WAL mode whose last commits are still in its
// -wal (the application stopped without checkpointing: killed, or
// keeping its log): the file and its -wal stay as they were. The refusal
// was the last connection to close the file, and so checkpointed the
// application's log into it and removed the -wal.
func TestRefusalLeavesAnotherApplicationsWALAlone(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	app, err := sql.Open("sqlite", live)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA journal_mode=WAL`, `PRAGMA wal_autocheckpoint=0`,
		`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)`, `INSERT INTO users VALUES (1, 'ann')`} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// The files as the application left them when it stopped: the copy
	// of the file and its -wal while it has them open.
	for i, check := range []func(path string) error{
		func(path string) error { return sqlite.CheckFirstUse(ctx, path) },
		func(path string) error {
			b, err := sqlite.Open(ctx, path, nil)
			if err == nil {
				_ = b.Close(ctx)
			}
			return err
		},
	} {
		path := filepath.Join(dir, []string{"first-use.db", "open.db"}[i])
		for _, suffix := range []string{"", "-wal"} {
			data, err := os.ReadFile(live + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+suffix, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		wal, err := os.ReadFile(path + "-wal")
		if err != nil || len(wal) == 0 {
			t.Fatalf("the application's -wal: %d bytes, %v; want its commits", len(wal), err)
		}
		if err := check(path); err == nil {
			t.Fatalf("%s: another application's database accepted", filepath.Base(path))
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		walAfter, walErr := os.ReadFile(path + "-wal")
		if !bytes.Equal(before, after) || walErr != nil || !bytes.Equal(wal, walAfter) {
			t.Errorf("%s refused the database but changed it: the file %d bytes before, %d after (first difference at byte %d); "+
				"its -wal %d bytes before, %d after (%v); want both untouched",
				filepath.Base(path), len(before), len(after), firstDifference(before, after), len(wal), len(walAfter), walErr)
		}
	}
}
