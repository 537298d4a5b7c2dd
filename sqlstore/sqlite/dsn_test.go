package sqlite_test

import (
	"database/sql"
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
