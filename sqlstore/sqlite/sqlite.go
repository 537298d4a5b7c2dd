// Package sqlite is leasestore's embedded backend: a [protocol.Backend] and
// [audit.Reader] on one SQLite database file, through the pure-Go driver
// modernc.org/sqlite (no cgo).
//
// Open a file with [Open], which owns its *sql.DB, or hand [New] a *sql.DB
// made by [OpenDB], which stays the caller's. Neither migrates: run
// `leasectl migrate up` or migrations.Up(ctx, migrations.SQLite, db) first;
// an unmigrated or outdated file is refused with an error saying so.
//
// Every state change is one BEGIN IMMEDIATE transaction holding the
// idempotency look-up, the conditional statement, the fencing counter bump
// and the audit insert, so they commit together or not at all, also when
// several processes share the file. See queries.go for every statement.
//
// SQLite has no server and so no clock of its own to judge expiry by: the
// backend reads Go's time.Now() inside the write transaction, after the
// write lock is taken, so on one machine the times of successive state
// changes follow commit order (up to wall-clock steps). Processes sharing a
// file share the machine, and so the clock.
//
// The Backend implements [protocol.Notifier], so a blocking acquire
// (protocol.AcquireWait) wakes as soon as the holder lets go: at once for a
// release through the same Backend, within about [Config].NotifyInterval
// for one by another process, found by PRAGMA data_version on a connection
// that polls only while someone waits.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// DefaultBusyTimeout is how long a statement of a *sql.DB from [OpenDB]
// waits for a lock held by another connection before failing with
// SQLITE_BUSY, when its context allows that long.
const DefaultBusyTimeout = 5 * time.Second

// sinceSlack is the margin by which a read of the records since T starts
// before them: it starts at a record before which every record is older
// than T - sinceSlack (qSinceStart). The trail's steps back (migration 12)
// make that exact whatever the clocks did, and the margin is kept so that
// a read starts where it did before them in an ordinary trail: a write
// reads its time once it holds the file's write lock, but a *sql.DB given
// to [New] without _txlock=immediate reads it before waiting for the lock
// (its busy timeout), and the clocks of the processes writing the file may
// disagree a little.
const sinceSlack = time.Minute

// maxConns bounds the connections of a *sql.DB from [OpenDB]. Writes use one
// at a time (a Backend runs one write transaction at a time, the writes
// that wait meanwhile sharing the next); the others serve concurrent reads, which
// WAL lets proceed beside a writer. Each connection has its own page cache,
// so more would cost memory for little.
const maxConns = 4

// Config tunes a [Backend]. A nil *Config means all defaults.
type Config struct {
	// BusyTimeout is SQLite's busy_timeout for the *sql.DB that [Open]
	// creates: how long a statement waits for another connection's lock
	// when its context allows that long. A context deadline always ends the
	// wait first. [New] uses the caller's *sql.DB as it is configured, and
	// refuses a Config that sets BusyTimeout. Default: [DefaultBusyTimeout].
	BusyTimeout time.Duration

	// NotifyInterval is how often, while a blocking acquire waits
	// (protocol.AcquireWait), the backend checks on a connection of its
	// own whether another connection committed, to wake waiters of a key
	// that another process released. Releases through the same Backend
	// wake them at once. Default: [DefaultNotifyInterval].
	NotifyInterval time.Duration

	// testNow replaces time.Now in this package's tests (see
	// export_test.go), so that a manual clock passes TTLs without
	// sleeping; production code cannot set it.
	testNow func() time.Time
	// testBetweenPruneBatches runs in this package's tests (see
	// export_test.go) after each prune batch that committed and was not
	// the prune's last, before the next begins.
	testBetweenPruneBatches func()
	// NoCoalescing runs every write in a transaction of its own, one
	// after the other, for comparison. Default: false: a write that finds
	// no other running runs its own transaction at once, and the writes
	// that arrive while one runs share the next transaction (one commit,
	// one fsync), each in a savepoint of its own, so each sees the writes
	// before it and fails alone; if that commit fails, they all fail.
	NoCoalescing bool
}

// Backend is the SQLite backend. It implements [protocol.Backend],
// [protocol.BulkRenewer], [protocol.Notifier],
// [protocol.NamespaceLister], [protocol.Sweeper], [protocol.TokenRaiser],
// [audit.Reader] and [audit.Pruner], and is safe for concurrent use.
// Create it with [Open] or [New]; most callers wrap it in a
// [protocol.Runtime] with protocol.New. Called directly, an operation
// whose context carries no deadline (Acquire, Renew, RenewMany, Release,
// Revoke, Get, List, ReadAudit, Namespaces, Sweep, Health) gets the
// runtime's default, [protocol.DefaultTimeout], so that it answers
// timeout rather than waiting as long as the busy timeout allows for a
// write lock another connection holds.
type Backend struct {
	db    *sql.DB
	owned bool   // Close closes db
	file  string // the database file, for messages
	now   func() time.Time
	stmts statements

	// writer runs this Backend's write transactions one at a time,
	// coalescing the writes that wait meanwhile (see writer).
	writer *writer
	// txStmts are the write transaction's statements (see Backend.inTx).
	txStmts txStatements

	notify notifier // wakes waiters of released and revoked keys (notify.go)

	// guard records the file and -shm this Backend opened, and refuses
	// every operation once the path names others (identity.go).
	guard fileGuard

	// tests only (export_test.go): see Config.testBetweenPruneBatches
	betweenPruneBatches func()

	drops backendkit.Background // prunes' claims being freed after their prune answered (prune.go)

	// closed is set by Close once the freeing of prunes' request ids
	// ended (drops), or when its context ends first: every call from then
	// on is refused (closedError), also on a *sql.DB given to New, which
	// stays open and where database/sql would prepare a closed statement
	// again for a transaction.
	closed atomic.Bool
	// alone is held shared by each write run alone (writeAlone), and by
	// the counter's repair (repairCounter), and taken by Close's work
	// (shut), once closed is set, to wait for them: the Coalescer's Wait
	// (waitWrites) waits for batches only.
	alone sync.RWMutex
	// closer runs Close's work (shut) once, in a goroutine, and lets a
	// Close whose context ends answer while that work waits for what is
	// in flight.
	closer backendkit.Closer
}

var (
	_ protocol.Backend     = (*Backend)(nil)
	_ protocol.BulkRenewer = (*Backend)(nil)
	_ audit.Reader         = (*Backend)(nil)
)

// OpenDB returns a *sql.DB on the SQLite file at path, configured the way
// the backend needs it, and checks that the file can be opened. path is a
// file name (created when missing) or a "file:" URI, whose SQLite
// parameters (mode=ro, ...) are kept. The caller owns the *sql.DB and closes
// it; pass it to [New] and to migrations.Up.
//
// The file and its connections are set up with:
//
//   - journal_mode=WAL: readers do not block the writer nor the writer
//     readers, and a commit appends to the log instead of rewriting pages.
//     The mode is stored in the file, so every process agrees on it, and
//     it is set once here rather than by every new connection: switching
//     a fresh file to WAL while another process opens it fails at once
//     with SQLITE_BUSY (SQLite does not wait in the busy handler for it),
//     so OpenDB retries the switch until its deadline.
//   - synchronous=FULL: each commit is fsynced before it returns. With
//     NORMAL, WAL is consistent after a power loss but may lose the last
//     commits, and a lost commit would let a fencing token be issued twice.
//   - busy_timeout ([DefaultBusyTimeout]): a statement that meets another
//     connection's lock (another process, a second handle) waits for it
//     instead of failing at once with SQLITE_BUSY. The driver ends the wait
//     early when the statement's context is done.
//   - _txlock=immediate: every transaction begun through database/sql takes
//     the write lock at BEGIN. A deferred transaction that reads and then
//     writes can find at its first write that another connection committed
//     meanwhile, and SQLite then fails it with SQLITE_BUSY at once, without
//     waiting: its snapshot is stale, so retrying cannot help. Taking the
//     lock first makes the wait happen at BEGIN, where the busy timeout
//     applies, and makes each transaction see the latest state.
//   - foreign_keys=ON: leasestore's schema has no foreign keys today; it is
//     on so that a future migration adding one is enforced.
//
// A "file:" URI's parameters that would change these (the driver's
// _synchronous, _busy_timeout, _foreign_keys, _txlock and _journal_mode,
// their aliases, and _pragma of the same pragmas) are replaced or dropped;
// the others are kept. A _pragma must be one pragma written NAME(VALUE) or
// NAME=VALUE (a plain name, optionally main.NAME, and no ";"); any other
// spelling is refused, since SQLite would run it unrecognised. A URI that
// turns SQLite's file locks off (nolock=1, vfs=unix-none) is refused:
// without them two writers could issue one fencing token twice. So is
// _pragma=locking_mode(...), by which one connection could keep the file's
// lock from every other, and cache=shared and _pragma=read_uncommitted(...),
// by which reads could see changes that never commit. So is immutable=1,
// which reads the file without its locks and its -wal. Each refusal of
// what the path says (these, a _pragma in another spelling, an in-memory
// database) is a *[protocol.Error] of status invalid.
//
// A path whose directory does not exist or is a file is refused with
// status invalid, naming the directory ([CheckDirectory]).
//
// At most four connections are open: writes of a Backend take one at a
// time, and the rest serve reads concurrently.
func OpenDB(path string) (*sql.DB, error) {
	return openDB(path, DefaultBusyTimeout, nil)
}

// openDB is [OpenDB] with the busy timeout busy. check, when not nil, runs
// before the file is switched to WAL (the first write), on a *sql.DB of
// its own that only reads (readOnlyDataSourceName), closed before the
// *sql.DB returned is opened; its error is returned.
func openDB(path string, busy time.Duration, check func(context.Context, *sql.DB, string) error) (*sql.DB, error) {
	dsn, file, err := dataSourceName(path, busy)
	if err != nil {
		return nil, err
	}
	if err := checkDirectory(file); err != nil {
		return nil, err
	}
	if err := notRegular(file); err != nil {
		return nil, err
	}
	// sql.Open connects lazily: connect now so a bad path fails here, naming
	// the file, rather than in the first operation.
	ctx, cancel := context.WithTimeout(context.Background(), busy+time.Second)
	defer cancel()
	if check != nil {
		if err := checkReadOnly(ctx, path, busy, check); err != nil {
			return nil, interpretError(ctx, "", file, err)
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, interpretError(ctx, "", file, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := enableWAL(ctx, db); err != nil {
		_ = db.Close()
		return nil, interpretError(ctx, "", file, err)
	}
	return db, nil
}

// checkReadOnly runs check on a *sql.DB that opens path read-only
// (readOnlyDataSourceName), and closes it.
func checkReadOnly(ctx context.Context, path string, busy time.Duration, check func(context.Context, *sql.DB, string) error) error {
	dsn, file, err := readOnlyDataSourceName(path, busy)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	return errors.Join(check(ctx, db, file), db.Close())
}

// refuseWithoutStore refuses, before [Open] writes anything to it, a
// file without leasestore's version table (an empty file, another
// application's database), which [Backend.checkStore] would refuse once
// the file had been switched to WAL.
func refuseWithoutStore(ctx context.Context, db *sql.DB, file string) error {
	var n int
	if err := db.QueryRowContext(ctx, qSchemaTable, migrations.VersionTable).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return sqlstore.SchemaVersionError(0, migrations.LatestVersion, fmt.Sprintf("sqlite database %q", file))
	}
	return nil
}

// CheckFirstUse returns nil when path (a file name or a "file:" URI, as
// for [OpenDB]) names no file yet, an empty file or database, or a file
// holding leasestore's version table (at any version: migrations.Up
// brings it up). For a database of another application, whose tables
// are none of them leasestore's version table, it returns an
// *[protocol.Error] of status unavailable naming those tables and
// `leasectl migrate up`, which adds leasestore's tables to it when that
// is meant. It reads the file through a read-only connection and writes
// nothing to it nor to its -wal (SQLite may create the -shm, the -wal's
// index, which it rebuilds from the -wal). A tool that
// creates and migrates a store on first use (leasectl) calls it before
// [OpenDB], which switches the file to WAL, and migrations.Up.
func CheckFirstUse(ctx context.Context, path string) error {
	_, file, err := dataSourceName(path, DefaultBusyTimeout)
	if err != nil {
		return err
	}
	if err := notRegular(file); err != nil {
		return err
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		return nil // OpenDB creates a missing file, or says why it cannot
	}
	var tables []string
	if err := checkReadOnly(ctx, path, DefaultBusyTimeout, func(ctx context.Context, db *sql.DB, _ string) (err error) {
		tables, err = otherTables(ctx, db)
		return err
	}); err != nil {
		return interpretError(ctx, "", file, err)
	}
	if len(tables) == 0 {
		return nil
	}
	return backendkit.NewError("", protocol.StatusUnavailable, nil,
		"sqlite database %q holds tables of another application (%s) and no leasestore store, which is created "+
			"on first use only in a new or empty file: point --dsn at another file, or, to keep leasestore's "+
			"tables in this database, run `leasectl migrate up --dsn sqlite:%s` first", file, strings.Join(tables, ", "), path)
}

// notRegular refuses a file, or its -wal or -shm, that exists and is no
// regular file (after symbolic links): SQLite answers a directory with
// "unable to open", "disk I/O error" or a read-only store, and a named
// pipe or a device with "disk I/O error", and a reader of a named pipe
// (leasectl's check for a read-only file) blocks until a writer comes.
func notRegular(file string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(file + suffix)
		if err != nil || fi.Mode().IsRegular() {
			continue // a missing file is created; another failure is SQLite's to tell
		}
		kind := "special file"
		switch mode := fi.Mode(); {
		case mode.IsDir():
			kind = "directory"
		case mode&fs.ModeNamedPipe != 0:
			kind = "named pipe"
		case mode&fs.ModeSocket != 0:
			kind = "socket"
		case mode&fs.ModeDevice != 0:
			kind = "device"
		}
		if suffix == "" {
			return backendkit.NewError("", protocol.StatusUnavailable, nil,
				"sqlite database %q is not a regular file but a %s: name a SQLite database file, or a new file in an existing directory", file, kind)
		}
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"sqlite database %q: %s, where SQLite keeps the file's %s, is not a regular file but a %s: move it away",
			file, file+suffix, map[string]string{"-wal": "write-ahead log", "-shm": "WAL index"}[suffix], kind)
	}
	return nil
}

// CheckDirectory returns an error of status invalid, naming the directory
// and the fix, when the directory of path (a file name or a "file:" URI,
// as [Open] takes) does not exist or is a file: no store can be there and
// no retry helps, so [Open] and [OpenDB] refuse such a path so, before
// they make anything. It returns nil otherwise, and for a path the open
// refuses for another reason or a directory it cannot look into, which
// the open then names.
func CheckDirectory(path string) error {
	_, file, err := dataSourceName(path, 0)
	if err != nil {
		return nil
	}
	return checkDirectory(file)
}

// checkDirectory is [CheckDirectory] for the file named by a path.
func checkDirectory(file string) error {
	if file == "" {
		return nil
	}
	dir := filepath.Dir(filepath.FromSlash(file))
	// The nearest ancestor that exists tells a missing directory from a
	// file in the way.
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err == nil && fi.IsDir() && d == dir:
			return nil
		case err == nil && fi.IsDir():
			return backendkit.NewError("", protocol.StatusInvalid, nil,
				"sqlite: the directory %s does not exist: create it (mkdir -p %s), or name a file in an existing directory",
				dir, textfield.ShellQuote(dir))
		case err == nil:
			return backendkit.NewError("", protocol.StatusInvalid, nil,
				"sqlite: %s is not a directory but a file: name a file in an existing directory", d)
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// otherTables returns the tables of db (but SQLite's own) when none of
// them is leasestore's version table, and nil when it is among them.
func otherTables(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, qTables)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if name == migrations.VersionTable {
			return nil, nil
		}
		tables = append(tables, name)
	}
	return tables, rows.Err()
}

// enableWAL switches the file to WAL, or checks that it is in WAL already,
// retrying while another connection's lock makes the switch fail with
// SQLITE_BUSY, until ctx ends.
func enableWAL(ctx context.Context, db *sql.DB) error {
	backoff := time.Millisecond
	for {
		var mode string
		err := db.QueryRowContext(ctx, qJournalModeWAL).Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				// A read-only file in another journal mode cannot be switched.
				return fmt.Errorf("sqlite: the journal mode is %q and cannot be switched to WAL (open the file read-write once)", mode)
			}
			return nil
		}
		if !isBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// dataSourceName turns path (a file name or a "file:" URI) into the
// driver's DSN, and returns the file name for messages.
func dataSourceName(path string, busy time.Duration) (dsn, file string, err error) {
	u, file, err := dataSourceURI(path, busy)
	if err != nil {
		return "", "", err
	}
	return u.String(), file, nil
}

// readOnlyDataSourceName is [dataSourceName] with mode=ro, for a check
// that reads a file before it is known to be a leasestore store. A
// read-write connection that is the last of the process on a file in WAL
// mode checkpoints the file's -wal into it and deletes the -wal as it
// closes, even one that only read, and so changes another application's
// database (its commits still in its -wal); a read-only one leaves both as
// they were.
func readOnlyDataSourceName(path string, busy time.Duration) (dsn, file string, err error) {
	u, file, err := dataSourceURI(path, busy)
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	q.Set("mode", "ro")
	u.RawQuery = q.Encode()
	return u.String(), file, nil
}

// dataSourceURI is [dataSourceName]'s DSN as a URL.
func dataSourceURI(path string, busy time.Duration) (u *url.URL, file string, err error) {
	if path == "" {
		return nil, "", errors.New("sqlite: empty database path")
	}
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if strings.HasPrefix(path, "file:") {
		if u, err = url.Parse(path); err != nil {
			return nil, "", fmt.Errorf("sqlite: database URI %q: %w", path, err)
		}
		file = u.Path
		if u.Opaque != "" {
			// A relative URI ("file:a%20b.db"): its path stays escaped in
			// Opaque. Decoded, as SQLite decodes it, and made absolute as
			// a plain name is, so the file looked for is the one opened.
			if file, err = url.PathUnescape(u.Opaque); err != nil {
				return nil, "", fmt.Errorf("sqlite: database URI %q: %w", path, err)
			}
			if file == ":memory:" {
				return nil, "", inMemoryError(path)
			}
			abs, err := filepath.Abs(filepath.FromSlash(file))
			if err != nil {
				return nil, "", fmt.Errorf("sqlite: database URI %q: %w", path, err)
			}
			u = &url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true, RawQuery: u.RawQuery}
		}
		if q := u.Query(); q.Get("mode") == "memory" || q.Get("vfs") == "memdb" {
			// An in-memory database: mode=memory, or the memdb VFS
			// (file:/NAME?vfs=memdb, shared by one process's connections).
			return nil, "", inMemoryError(path)
		}
	} else {
		if path == ":memory:" {
			// SQLite's name of an in-memory database, not a file name.
			return nil, "", inMemoryError(path)
		}
		// A URI rather than a plain name, so that characters such as '?'
		// and '#' in the path are escaped instead of being taken for
		// parameters.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: database path %q: %w", path, err)
		}
		u = &url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true}
		file = path
	}
	q := u.Query()
	if param := withoutFileLocks(q); param != "" {
		return nil, "", dsnError("sqlite: database URI %q: %s turns SQLite's file locks off, which keep two writers (two processes, "+
			"or a service and a sqlite3 shell) from committing at once and issuing one fencing token twice: remove it", path, param)
	}
	for _, v := range q["immutable"] {
		if uriTrue(v) {
			return nil, "", dsnError("sqlite: database URI %q: immutable=%s reads the file as if nothing ever changed it: "+
				"without its locks and its -wal, so neither other processes' commits nor a safe write: remove it", path, v)
		}
	}
	for _, v := range q["cache"] {
		if strings.EqualFold(v, "shared") {
			return nil, "", dsnError("sqlite: database URI %q: cache=%s shares one page cache among the process's connections "+
				"to the file, which then lock tables without waiting out the busy timeout and, with read_uncommitted, read "+
				"changes that never committed (a lease and token never granted): remove it", path, v)
		}
	}
	// The driver's aliases win over the keys set below, and journal_mode
	// is OpenDB's (enableWAL): a URI cannot undo what OpenDB pins.
	for _, k := range []string{"_sync", "_timeout", "_fk", "_journal", "_journal_mode"} {
		q.Del(k)
	}
	var pragmas []string
	for _, p := range q["_pragma"] {
		name, err := pragmaName(path, p)
		if err != nil {
			return nil, "", err
		}
		if why := refusedPragmas[name]; why != "" {
			return nil, "", dsnError("sqlite: database URI %q: _pragma=%s sets %s, which %s: remove it", path, p, name, why)
		}
		if !pinnedPragmas[name] {
			pragmas = append(pragmas, p)
		}
	}
	q["_pragma"] = pragmas
	if len(pragmas) == 0 {
		q.Del("_pragma")
	}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	u.RawQuery = q.Encode()
	return u, file, nil
}

// dsnError is the refusal of a DSN for what it says, whatever the file
// holds: invalid (bad input, which no retry cures), never unavailable.
func dsnError(format string, args ...any) error {
	return backendkit.NewError("", protocol.StatusInvalid, nil, format, args...)
}

// inMemoryError refuses path, a name of an in-memory database.
func inMemoryError(path string) error {
	return dsnError("sqlite: %q names an in-memory database, which no other connection or process shares "+
		"and which cannot be in WAL: name a file (leasestore.db), or use the memstore package in tests", path)
}

// withoutFileLocks returns the parameter of a "file:" URI's query q that
// turns SQLite's file locks off ("nolock=1", "vfs=unix-none"), or "".
func withoutFileLocks(q url.Values) string {
	for _, v := range q["nolock"] {
		if uriTrue(v) {
			return "nolock=" + v
		}
	}
	if v := q.Get("vfs"); strings.EqualFold(v, "unix-none") {
		return "vfs=" + v
	}
	return ""
}

// uriTrue reports whether SQLite reads v, a URI parameter's value, as a
// true boolean: yes, true, on or a non-zero integer.
func uriTrue(v string) bool {
	n, err := strconv.Atoi(v)
	return (err == nil && n != 0) || slices.Contains([]string{"yes", "true", "on"}, strings.ToLower(v))
}

// pragmaForm is the one form a "file:" URI's _pragma parameter may take:
// a pragma's plain name, optionally in schema main, and one value in
// parentheses or after "=". The driver runs "PRAGMA " and the text as it
// is, so any other spelling SQLite reads (a quoted or bracketed name, a
// second statement after ";") could set a pragma OpenDB pins under a name
// it would not recognise.
var pragmaForm = regexp.MustCompile(`^\s*(?i:main\s*\.\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*` +
	`(?:\(\s*(?:` + pragmaValue + `)\s*\)|=\s*(?:` + pragmaValue + `))\s*$`)

// pragmaValue is a _pragma's value: a word or number, or a string in
// single quotes.
const pragmaValue = `[+-]?[A-Za-z0-9_.]+|'[^';]*'`

// pinnedPragmas are the pragmas OpenDB sets, whose _pragma it drops.
var pinnedPragmas = map[string]bool{"busy_timeout": true, "synchronous": true, "journal_mode": true, "foreign_keys": true}

// refusedPragmas are the pragmas a _pragma may not set, with why.
var refusedPragmas = map[string]string{
	"locking_mode": "would let a connection keep the file's lock (locking_mode EXCLUSIVE), so that the pool's other " +
		"connections, other Backends and other processes could not read or write the store (they fail with " +
		"\"disk I/O error\" or SQLITE_BUSY)",
	"read_uncommitted": "would let a connection read other connections' changes before they commit (a lease and " +
		"token never granted) wherever SQLite shares a cache",
}

// pragmaName returns the name, in lower case, of the pragma p (a _pragma
// parameter of the URI path) sets, or an error when p is not of
// [pragmaForm].
func pragmaName(path, p string) (string, error) {
	m := pragmaForm.FindStringSubmatch(p)
	if m == nil {
		return "", dsnError("sqlite: database URI %q: _pragma=%s is not one pragma in the form NAME(VALUE) or NAME=VALUE "+
			"(a plain name, optionally main.NAME; a word, number or 'string' as the value; no \";\"): write it so", path, p)
	}
	return strings.ToLower(m[1]), nil
}

// Open opens the SQLite file at path (a file name or a "file:" URI, as for
// [OpenDB]) with cfg (nil for defaults) and checks its schema. The Backend
// owns the *sql.DB it creates and closes it in Close. A path whose
// directory does not exist or is a file is refused with status invalid,
// naming the directory, as [OpenDB] refuses it ([CheckDirectory]).
//
// Open does not migrate: a file without leasestore's schema, or with an
// older one, is refused with an *[protocol.Error] of status unavailable
// naming `leasectl migrate up` (one without leasestore's version table,
// such as another application's database, before anything is written to
// it). Use [OpenDB], migrations.Up and [New] to
// create and migrate a file from code. A file whose triggers or prune
// window are not as the migrations left them is refused too, as Health
// refuses it; a fencing counter lowered behind the tokens the file holds
// is moved up past them, as Health moves it.
//
// The Backend keeps a read-only connection of its own on the file while it
// runs, besides the *sql.DB's, so that SQLite keeps the file's -shm (see
// Health); so does a Backend from New.
func Open(ctx context.Context, path string, cfg *Config) (*Backend, error) {
	busy := DefaultBusyTimeout
	if cfg != nil && cfg.BusyTimeout > 0 {
		busy = cfg.BusyTimeout
	}
	// A missing file is refused before SQLite would create an empty one
	// that Open then refuses as unmigrated, leaving it behind.
	if _, file, err := dataSourceName(path, busy); err == nil && file != "" {
		_, statErr := os.Stat(file)
		if _, dirErr := os.Stat(filepath.Dir(file)); errors.Is(statErr, fs.ErrNotExist) && dirErr == nil {
			return nil, backendkit.NewError("", protocol.StatusUnavailable, statErr,
				"sqlite: no leasestore store at %s: create and migrate it with `leasectl migrate up --dsn sqlite:%s` (or OpenDB and migrations.Up)", file, file)
		}
	}
	db, err := openDB(path, busy, refuseWithoutStore)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(ctx, db, cfg, true)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return b, nil
}

// New returns a Backend on db, which the caller keeps: Close leaves it
// open, and the caller closes it after closing the Backend. db should come
// from [OpenDB]; a *sql.DB configured otherwise must at least use WAL,
// a busy timeout and _txlock=immediate, or concurrent writers on the file
// will see spurious timeouts (never wrong answers), and a sweep or prune
// may overrun its deadline by up to the busy timeout; one below
// synchronous=FULL is refused (a power cut could lose a committed acquire).
// New checks the schema like [Open] and does not migrate. cfg may be nil; one that sets
// BusyTimeout is refused (it configures the *sql.DB Open makes). So is a
// db limited to fewer than [MinOpenConns] connections (SetMaxOpenConns):
// while anyone waits for a key (a blocking acquire, a holder's watch),
// the poller that wakes them keeps a connection to itself, and with one
// every write would wait for it until its deadline. Keep the limit at
// MinOpenConns or more after New too: below it, [Backend.Subscribe] (the
// start of every wait) is refused the same way, and waiters poll; a
// poller already running lets go of its connection, and its waiters hear
// only this Backend's releases until they recheck.
func New(ctx context.Context, db *sql.DB, cfg *Config) (*Backend, error) {
	if db == nil {
		return nil, errors.New("sqlite: nil *sql.DB")
	}
	if err := connsRefusal(db, "new"); err != nil {
		return nil, err
	}
	if cfg != nil && cfg.BusyTimeout != 0 {
		return nil, errors.New("sqlite: new: Config.BusyTimeout configures the *sql.DB Open makes; " +
			"New uses yours as it is: open it with OpenDB (busy_timeout is in its DSN)")
	}
	return newBackend(ctx, db, cfg, false)
}

// MinOpenConns is the fewest connections a *sql.DB given to [New] may be
// limited to: one the poller that wakes waiters keeps while anyone waits,
// and one that every other statement takes in turn.
const MinOpenConns = 2

// connsRefusal returns the refusal (invalid) of db when it is limited to
// fewer than [MinOpenConns] connections, by what ("new", "subscribe");
// nil otherwise. It reads db.Stats, which takes no connection: New checks
// it, and so does each Subscribe, the start of every wait, for a limit
// lowered after New.
func connsRefusal(db *sql.DB, what string) error {
	n := db.Stats().MaxOpenConnections
	if n <= 0 || n >= MinOpenConns {
		return nil
	}
	return backendkit.NewError("", protocol.StatusInvalid, nil,
		"sqlite: %s: the *sql.DB is limited to %d connection(s) (SetMaxOpenConns), but the backend needs %d: "+
			"while anyone waits for a key, the poller that wakes them keeps one, and every write would wait for it "+
			"until its deadline: keep the limit OpenDB sets (its busy timeout and immediate transactions keep "+
			"concurrent writers from failing), or call db.SetMaxOpenConns(%d) or more", what, n, MinOpenConns, MinOpenConns)
}

// synchronousFull is PRAGMA synchronous's FULL.
const synchronousFull = 2

// checkSynchronous refuses a *sql.DB whose connections commit without
// syncing the log (synchronous below FULL: see OpenDB). Every connection of
// a *sql.DB is opened from the same DSN, so one tells for all.
func checkSynchronous(ctx context.Context, db *sql.DB) error {
	var level int
	if err := db.QueryRowContext(ctx, qSynchronous).Scan(&level); err != nil {
		return interpretError(ctx, "", "", err)
	}
	if level >= synchronousFull {
		return nil
	}
	name := map[int]string{0: "OFF", 1: "NORMAL"}[level]
	return backendkit.NewError("", protocol.StatusInvalid, nil,
		"sqlite: synchronous is %s on this *sql.DB's connections, so a power cut can lose a committed acquire "+
			"and issue its fencing token again: open it with sqlite.OpenDB, or add _pragma=synchronous(FULL) to its DSN", name)
}

func newBackend(ctx context.Context, db *sql.DB, cfg *Config, owned bool) (*Backend, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	b := &Backend{db: db, owned: owned, now: cfg.testNow, betweenPruneBatches: cfg.testBetweenPruneBatches}
	maxBatch := maxWriteBatch
	if cfg.NoCoalescing {
		maxBatch = 1
	}
	b.writer = newWriter(b, maxBatch)
	if b.now == nil {
		b.now = time.Now
	}
	b.notify = notifier{b: b, interval: cfg.NotifyInterval}
	if b.notify.interval <= 0 {
		b.notify.interval = DefaultNotifyInterval
	}
	var file sql.NullString
	if err := db.QueryRowContext(ctx, qDatabaseFile).Scan(&file); err != nil {
		return nil, interpretError(ctx, "", "", err)
	}
	b.file = file.String
	if b.file == "" {
		b.file = "(in memory)"
	} else if err := checkSynchronous(ctx, db); err != nil {
		return nil, err
	}
	if err := b.checkStore(ctx); err != nil {
		return nil, err
	}
	if err := b.guard.open(ctx, db, b.file); err != nil {
		return nil, interpretError(ctx, "", b.file, err)
	}
	if err := b.stmts.prepare(ctx, db); err != nil {
		_ = b.guard.close()
		return nil, b.interpret(ctx, "", err)
	}
	return b, nil
}

// Name returns "sqlite".
func (b *Backend) Name() string { return "sqlite" }

// File returns the path of the database file, as SQLite reports it.
func (b *Backend) File() string { return b.file }

// checkStore refuses a file whose leasestore schema is missing, older than
// migrations.LatestVersion, or newer and not servable by this release,
// and then one whose triggers are not those its migrations created or
// that holds a committed prune window (storeRefusal).
func (b *Backend) checkStore(ctx context.Context) error {
	refusal, err := b.schemaRefusal(ctx, b.db)
	if err == nil && refusal == nil {
		refusal, err = b.storeRefusal(ctx, b.db, "")
	}
	if err != nil {
		// Not b.interpret, which calls schemaRefusal itself.
		return interpretError(ctx, "", b.file, err)
	}
	if refusal != nil {
		return refusal
	}
	return b.repairCounter(ctx)
}

// repairCounter moves the fencing counter up to the greatest token the
// file holds when it is below it (qIssuedAbove, qRepairCounter), as the
// PostgreSQL backend repairs a fencing sequence behind the issued tokens
// at open and health. The counter's triggers keep it growing, but another
// handle on the file can lower it behind them (the trigger dropped and
// made again, or the sqlite3 shell's `.dbconfig enable_trigger off`), and
// every acquire would then issue tokens issued before. The check is a
// read; the repair writes only when the counter is behind. A handle that
// cannot write, which issues no token, is left as it is (Health refuses
// it anyway). A repair that fails otherwise is refused, naming `leasectl
// fencing raise`. The repair is a write that Close waits for, as it waits
// for writeAlone's (b.alone): one that finds the Backend closed writes
// nothing and answers closed.
func (b *Backend) repairCounter(ctx context.Context) error {
	var above sql.NullInt64
	if err := b.db.QueryRowContext(ctx, qIssuedAbove).Scan(&above); err != nil {
		return interpretError(ctx, "", b.file, err)
	}
	if !above.Valid {
		return nil
	}
	b.alone.RLock()
	defer b.alone.RUnlock()
	if b.closed.Load() {
		return b.closedError("")
	}
	_, err := b.db.ExecContext(ctx, qRepairCounter, above.Int64)
	if err == nil || isReadOnly(err) {
		return nil
	}
	return backendkit.NewError("", protocol.StatusUnavailable, err,
		"sqlite database %q: the fencing counter (leasestore_fencing) is behind token %d, which the file holds, "+
			"and could not be moved past it: run `leasectl fencing raise --dsn sqlite:%s`", b.file, above.Int64, b.file)
}

// rowQuerier is what schemaRefusal reads through: the *sql.DB, or a
// *sql.Tx that holds one of its connections.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaRefusal reads the file's schema version and returns the refusal of
// a schema this release cannot serve (nil when it can), or the error that
// kept it from reading the version.
func (b *Backend) schemaRefusal(ctx context.Context, q rowQuerier) (*protocol.Error, error) {
	var n int
	if err := q.QueryRowContext(ctx, qSchemaTable, migrations.VersionTable).Scan(&n); err != nil {
		return nil, err
	}
	var v int64
	if n > 0 {
		if err := q.QueryRowContext(ctx, qSchemaVersion).Scan(&v); err != nil {
			return nil, err
		}
	}
	var oldest int64
	if v > migrations.LatestVersion {
		// A missing table (a schema that predates it) leaves oldest at 0.
		_ = q.QueryRowContext(ctx, qSchemaCompat).Scan(&oldest)
	}
	if !sqlstore.ServesSchema(v, oldest, migrations.LatestVersion) {
		return sqlstore.SchemaVersionError(v, migrations.LatestVersion, fmt.Sprintf("sqlite database %q", b.file)), nil
	}
	return nil, nil
}

// Health returns nil when the file is readable, this handle can write it
// and its schema is current. A handle that cannot write (mode=ro,
// immutable=1, PRAGMA query_only, a file this process may not write) is
// refused with unavailable, as every write on it would be; so is a file
// whose file system has less than 1 MiB or no inode left (Linux), matching
// [ErrDiskFull]. So is, as at Open, a file in which a trigger that the
// migrations created (the audit trail's, the fencing counter's) is missing
// or altered, or a row of the prune window (leasestore_audit_prune) is
// committed, naming it and the fix; a fencing counter lowered behind its
// triggers is moved up past the tokens the file holds (as at Open: see
// repairCounter). A Backend whose path no longer names
// the file or the -shm it opened (the file put back from a copy, the -shm
// removed) fails Health and refuses every operation, matching
// [ErrFileReplaced], until it is restarted (Windows, which cannot replace
// an open file, is not checked).
func (b *Backend) Health(ctx context.Context) error {
	ctx, cancel := backendkit.WithDeadline(ctx) // called directly without one: the runtime's default
	defer cancel()
	if b.closed.Load() {
		return b.closedError(protocol.OpHealth)
	}
	err := b.guard.checkAll(protocol.OpHealth)
	if err == nil {
		err = b.checkStore(ctx)
	}
	if err == nil {
		if err = b.probeWrite(ctx); err != nil {
			err = interpretError(ctx, protocol.OpHealth, b.file, err)
		}
	}
	if err == nil {
		err = roomError(b.file) // the probe commits no page: it writes fine on a full disk
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		pe.Op = protocol.OpHealth
	}
	return err
}

// probeWrite checks that this handle can write the file, without waiting
// for the write lock: on one connection whose busy timeout is 0 for the
// probe, it runs qWriteProbe. SQLite refuses a handle that cannot write
// before it tries any lock, so SQLITE_BUSY means another connection is
// writing, which is no fault of this one. The connection gets its busy
// timeout back, or is discarded.
func (b *Backend) probeWrite(ctx context.Context) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var busy int64
	if err := conn.QueryRowContext(ctx, qBusyTimeout).Scan(&busy); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, qBusyTimeout+" = 0"); err != nil {
		return err
	}
	_, probeErr := conn.ExecContext(ctx, qWriteProbe)
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("%s = %d", qBusyTimeout, busy)); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never back to the pool without its timeout
		return err
	}
	if probeErr != nil && !isBusy(probeErr) {
		return probeErr
	}
	return nil
}

// Close closes the prepared statements and, when the Backend owns its
// *sql.DB (it came from [Open]), the *sql.DB, which waits for connections in
// use to be returned. A *sql.DB given to [New] is left open. Close first
// waits for the freeing of the request id of a prune that stopped early,
// when that went on after the prune answered (at most five seconds; see
// [Backend.PruneAudit]), then for the writes in flight, alone or batched;
// a write that was waiting for the file's write lock is then refused,
// writing nothing. Every call from then on (Subscribe included) fails with
// closed, matching [protocol.ErrClosed].
//
// Close returns once all that is done, and nothing is written after it
// returned nil. When ctx ends first (or had ended already) while Close
// waits for something in flight (one of the above, a waiter's poller, a
// read holding a connection of an owned *sql.DB), Close returns at once
// with a timeout error that matches ctx's and says what it was waiting
// for: the Backend then refuses every call all the same, and closes what
// it owns in the background once that wait ends (a write that had begun
// may still commit). With nothing in flight there is nothing to wait for:
// Close closes the Backend and returns nil whatever ctx says. Close is
// idempotent: a later call waits, in the same way, for the first to
// finish and returns its error.
func (b *Backend) Close(ctx context.Context) error {
	left, err := b.closer.Close(ctx, b.shut)
	if left == "" {
		return err
	}
	b.closed.Store(true) // also while a prune's request id is being freed: that write is refused
	return backendkit.NewError(protocol.OpClose, protocol.StatusTimeout, ctx.Err(),
		"sqlite database %q: the context ended while Close waited for %s; every call is refused from now on, "+
			"and Close finishes in the background once that wait ends (call Close again to wait for it)", b.file, left)
}

// The steps of shut that wait for what is in flight, as a Close cut off
// by its context names them.
const (
	stepPruneClaims = "a prune's freeing of its request id (a write of its own, at most 5s)"
	stepWrites      = "the writes in flight (one may wait for the file's write lock, which another connection holds, " +
		"and one that began may still commit)"
	stepPoller = "the poller that wakes waiters to let go of its connection"
	stepDB     = "the connections of the *sql.DB in use (a read in flight) to be returned"
)

// shut is Close's work, in a goroutine of its own (see Backend.closer):
// it waits for what is in flight, each wait a step of b.closer, and
// closes what the Backend owns.
func (b *Backend) shut() error {
	b.closer.Await(stepPruneClaims, b.drops.TryWait, b.drops.Wait)
	b.closed.Store(true)
	b.closer.Await(stepWrites, b.writer.q.TryWait, b.waitWrites)
	// Every write run alone has ended once this lock is held; one that
	// comes later sees closed.
	b.closer.Await(stepWrites, b.alone.TryLock, b.alone.Lock)
	defer b.alone.Unlock()
	b.closer.Await(stepPoller, b.notify.tryClose, b.notify.close)
	err := errors.Join(b.stmts.close(), b.guard.close())
	if b.owned {
		var dbErr error
		b.closer.Await(stepDB, func() bool {
			if b.db.Stats().InUse > 0 {
				return false
			}
			dbErr = b.db.Close()
			return true
		}, func() { dbErr = b.db.Close() })
		err = errors.Join(err, dbErr)
	}
	if err != nil {
		return fmt.Errorf("sqlite: close %q: %w", b.file, err)
	}
	return nil
}

// statements are prepared once per Backend; database/sql prepares each
// again, once, on every connection that runs it, and keeps it there.
type statements struct {
	findRequest, acquire, bumpFencing, renew, release, revoke                                         *sql.Stmt
	currentLease, insertAudit, list, listOwner, listAll, audit, auditKey, auditNewest, auditKeyNewest *sql.Stmt
	keepDelay, currentDelay, getLease, prunedThrough, auditTop, auditEnd, putBack, sinceStart         *sql.Stmt
	savepoint, rollbackSavepoint, releaseSavepoint                                                    *sql.Stmt
}

func (s *statements) fields() []struct {
	p **sql.Stmt
	q string
} {
	return []struct {
		p **sql.Stmt
		q string
	}{
		{&s.findRequest, qFindRequest}, {&s.acquire, qAcquire}, {&s.bumpFencing, qBumpFencing},
		{&s.renew, qRenew}, {&s.release, qRelease}, {&s.revoke, qRevoke},
		{&s.currentLease, qCurrentLease}, {&s.insertAudit, qInsertAudit}, {&s.list, qList}, {&s.listOwner, qListOwner}, {&s.listAll, qListAll},
		{&s.audit, qAudit}, {&s.auditKey, qAuditKey}, {&s.auditNewest, qAuditNewest}, {&s.auditKeyNewest, qAuditKeyNewest}, {&s.keepDelay, qKeepDelay}, {&s.currentDelay, qCurrentDelay},
		{&s.getLease, qGetLease}, {&s.prunedThrough, qPrunedThrough}, {&s.auditTop, qAuditTop}, {&s.auditEnd, qAuditEnd},
		{&s.putBack, qPutBack}, {&s.sinceStart, qSinceStart},
		{&s.savepoint, qSavepoint}, {&s.rollbackSavepoint, qRollbackSavepoint}, {&s.releaseSavepoint, qReleaseSavepoint},
	}
}

func (s *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, f := range s.fields() {
		st, err := db.PrepareContext(ctx, f.q)
		if err != nil {
			_ = s.close()
			return err
		}
		*f.p = st
	}
	return nil
}

func (s *statements) close() error {
	var errs []error
	for _, f := range s.fields() {
		if *f.p != nil {
			errs = append(errs, (*f.p).Close())
		}
	}
	return errors.Join(errs...)
}
