package sqlite_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A "file:" URI keeps its SQLite parameters, but not the driver's aliases
// that would undo what OpenDB pins: synchronous=FULL (a commit lost to a
// power cut could let a fencing token be issued twice), WAL and the busy
// timeout. The driver lets an alias (_sync, _timeout, _journal) win over
// the key OpenDB sets, and runs a _pragma busy_timeout after it, so they
// went through.
func TestOpenDBKeepsItsSettingsAgainstURIAliases(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	db, err := sqlite.OpenDB("file:" + path + "?_sync=OFF&_timeout=0&_journal=DELETE&_journal_mode=DELETE&_pragma=busy_timeout(0)&_pragma=synchronous(OFF)&_pragma=cache_size(-4000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var sync, busy int
	var journal string
	if err := conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	var cache int
	if err := conn.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil || cache != -4000 {
		t.Errorf("cache_size %d, %v; want the URI's -4000 (its other pragmas are kept)", cache, err)
	}
	if sync != 2 || busy != int(sqlite.DefaultBusyTimeout.Milliseconds()) || journal != "wal" {
		t.Fatalf("synchronous %d, busy_timeout %d, journal_mode %q; want 2 (FULL), %d, \"wal\"",
			sync, busy, journal, sqlite.DefaultBusyTimeout.Milliseconds())
	}
}

// New refuses a borrowed *sql.DB whose connections commit without syncing
// (synchronous below FULL): a power cut could lose a committed acquire and
// let its fencing token be issued again. OpenDB pins FULL; a pool opened
// otherwise (NORMAL is common advice for WAL) was taken as it was.
func TestNewRefusesADBBelowSynchronousFull(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	for _, level := range []string{"OFF", "NORMAL"} {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous("+level+")")
		if err != nil {
			t.Fatal(err)
		}
		b, err := sqlite.New(ctx, db, nil)
		if err == nil {
			_ = b.Close(ctx)
			_ = db.Close()
			t.Fatalf("New on a *sql.DB with synchronous=%s: no error", level)
		}
		_ = db.Close()
		// invalid, not unavailable: the *sql.DB's DSN does not change, so
		// no retry can help.
		expectStatus(t, "New with synchronous="+level, err, protocol.StatusInvalid, "synchronous", "OpenDB", "_pragma=synchronous(FULL)")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(EXTRA)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatalf("New with synchronous=EXTRA: %v", err)
	}
	_ = b.Close(ctx)
}

// A "file:" URI that turns SQLite's file locks off (nolock=1, or the
// unix-none VFS) is refused, naming the parameter: without the locks two
// writers (two processes, or a service and an operator's sqlite3 shell)
// commit at once and issue one fencing token twice. It was refused only
// by the accident of WAL needing the locks, with SQLITE_CANTOPEN's advice
// to check the path and its directory.
func TestURIWithoutFileLocksIsRefused(t *testing.T) {
	path := migratedFile(t)
	for _, param := range []string{"nolock=1", "nolock=true", "vfs=unix-none"} {
		db, err := sqlite.OpenDB("file:" + path + "?" + param)
		if err == nil {
			_ = db.Close()
			t.Errorf("OpenDB with %s: no error", param)
			continue
		}
		for _, want := range []string{param, "lock", "fencing token"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("OpenDB with %s: %v; want it to name %q", param, err, want)
			}
		}
	}
	db, err := sqlite.OpenDB("file:" + path + "?nolock=0")
	if err != nil {
		t.Fatalf("OpenDB with nolock=0 (the locks kept): %v", err)
	}
	_ = db.Close()
}
