package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// The file a Backend opened, and its -shm. A running Backend's connections
// keep the files they opened, whatever the path names later: a copy of
// the file renamed over it (a restore), or its -shm removed (taken for a
// stale lock file), leaves the Backend on the old ones while every process
// that opens the path meets the new ones. SQLite's write lock lives in the
// -shm, so two -shm files are two write locks on one store, and a
// replaced file is another store: either way the Backend and the others
// issue the same fencing tokens. So a Backend records which files it
// opened (device and inode, os.SameFile) and, before each write
// transaction, before reads (at most every millisecond: checkRead) and in
// Health, checks that the path still names them; once it does not, the
// Backend refuses every operation, for good (replacedError names the fix:
// restart against the file at the path, and raise the fencing counter if
// it was a restore).
//
// A write transaction or a read stats one file: the -shm, which decides
// whether this Backend's write lock is the one the other processes take
// (the restore docs/operator-guide.md describes removes the old -wal and
// -shm with the file, and the first process to open the copy makes a new
// -shm), or the
// file itself when the handle has none (an immutable handle reads the file
// alone, one with locking_mode exclusive keeps the index in memory).
// Health stats both, so a file replaced while its old -shm was left in
// place is found there.
//
// SQLite itself removes the -wal and -shm when the last connection to the
// file closes, and the next connection makes a new -shm: a database/sql
// pool that closed its last connection (one that keeps no idle
// connection) would have its Backend take that for a replacement. A
// Backend therefore keeps a read-only connection of its own open on the
// file while it runs (keeper, never used after open), so that SQLite
// removes them only once the Backend closed. Windows refuses to remove or
// replace a file that is open, so there nothing is recorded nor checked.

// fileGuard is a Backend's record of the files it opened; safe for
// concurrent use.
type fileGuard struct {
	file      string      // the database file, as SQLite names it
	main, shm os.FileInfo // as opened; nil: not checked (in memory, Windows; shm: none)
	keeper    *sql.DB     // holds the file open while the Backend runs; nil when shm is

	seen   atomic.Pointer[fileChange] // what changed, once a check found it: sticky
	closed atomic.Bool                // the Backend closed: nothing to check

	opened   time.Time    // when open recorded the files: lastRead counts from it
	lastRead atomic.Int64 // when a read last statted (checkRead), since opened
}

// open records the files of file (the path SQLite reports for db, the
// Backend's handle; "(in memory)" for none) as they are now and, when the
// handle keeps its WAL index in the -shm, opens the keeper. It holds one
// of db's connections meanwhile, so that the -shm is there (a pool that
// keeps no idle connection would let SQLite remove it) and the keeper
// joins the handle's.
func (g *fileGuard) open(ctx context.Context, db *sql.DB, file string) error {
	g.file, g.opened = file, time.Now()
	g.lastRead.Store(-int64(readCheckEvery))
	if runtime.GOOS == "windows" || file == "" || file == "(in memory)" {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRowContext(ctx, qSchemaTable, "").Scan(&n); err != nil { // a read: the WAL index is open
		return err
	}
	var mode string
	if err := conn.QueryRowContext(ctx, qJournalMode).Scan(&mode); err != nil {
		return err
	}
	main, err := os.Stat(file)
	if err != nil {
		return nil // not a file this process can look at: nothing to compare
	}
	g.main = main
	shm, err := os.Stat(file + "-shm")
	if !strings.EqualFold(mode, "wal") || err != nil {
		// No -shm of its own: an immutable handle reads without the WAL,
		// one with locking_mode exclusive keeps the index in memory.
		return nil
	}
	q := url.Values{"mode": {"ro"}, "_busy_timeout": {strconv.FormatInt(DefaultBusyTimeout.Milliseconds(), 10)}}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(file), OmitHost: true, RawQuery: q.Encode()}
	keeper, err := sql.Open("sqlite", u.String())
	if err != nil {
		return err
	}
	keeper.SetMaxOpenConns(1)
	keeper.SetMaxIdleConns(1)
	if err := keeper.QueryRowContext(ctx, qSchemaTable, "").Scan(&n); err != nil {
		_ = keeper.Close()
		return err
	}
	g.keeper, g.shm = keeper, shm
	return nil
}

// close ends the checks and closes the keeper, unless the path no longer
// names the files opened (changed): the keeper is then left open until the
// process exits. The last connection of a process to close a WAL file
// checkpoints the log it has open into the file, and this process's log
// is then one that was removed, holding pages of a history the other
// processes no longer see: written over the file, they would undo (or
// tear) what the others committed since. The open keeper holds the
// file's shared lock, so no other connection of this process is the last.
func (g *fileGuard) close() error {
	stale := g.keeper != nil && g.changed(true) != nil
	g.closed.Store(true)
	if stale {
		leftOpen.mu.Lock()
		leftOpen.keepers = append(leftOpen.keepers, g.keeper)
		leftOpen.mu.Unlock()
	}
	if g.keeper == nil || stale {
		return nil
	}
	return g.keeper.Close()
}

// leftOpen holds the keepers fileGuard.close left open, so that this
// package's tests can close them once every test ran and check that no
// other goroutine outlived its test (export_test.go). The process never
// closes them: they live until it exits, as they would unrecorded.
var leftOpen struct {
	mu      sync.Mutex
	keepers []*sql.DB
}

// check returns the refusal of a write transaction (op): nil while the
// path names the file this Backend opened, as far as one stat tells (the
// -shm's, see above).
func (g *fileGuard) check(op protocol.Op) error {
	if c := g.changed(false); c != nil {
		return replacedError(op, g.file, c)
	}
	return nil
}

// readCheckEvery is how often, at most, reads stat the -shm (checkRead).
const readCheckEvery = time.Millisecond

// checkRead is check for a read (op): a Backend that only reads (a
// follower of the audit trail, watch, get) would otherwise go on reading
// a file that was replaced, which nothing writes any more, and answer
// from it without an error. The stat is a system call, a noticeable part
// of a read's cost, so reads stat at most once every readCheckEvery (a read that
// follows the replacement closer than that may still read the old file;
// the next one is refused); once a check found the files replaced, every
// read is refused.
func (g *fileGuard) checkRead(op protocol.Op) error {
	if g.closed.Load() || g.main == nil {
		return nil
	}
	if c := g.seen.Load(); c != nil {
		return replacedError(op, g.file, c)
	}
	now := int64(time.Since(g.opened)) // monotonic
	last := g.lastRead.Load()
	if now-last < int64(readCheckEvery) || !g.lastRead.CompareAndSwap(last, now) {
		return nil // checked lately, or another read checks now
	}
	return g.check(op)
}

// checkAll is check for Health: it stats the file and its -shm.
func (g *fileGuard) checkAll(op protocol.Op) error {
	if c := g.changed(true); c != nil {
		return replacedError(op, g.file, c)
	}
	return nil
}

// changed returns what no longer is as opened (nil when all is), looking
// at the -shm (or the file, when it has none) and, with both, at both.
// What it finds once it returns from then on.
func (g *fileGuard) changed(both bool) *fileChange {
	if g.closed.Load() || g.main == nil {
		return nil
	}
	if c := g.seen.Load(); c != nil {
		return c
	}
	var c *fileChange
	if g.shm != nil {
		c = differs(g.file+"-shm", g.shm, "its -shm file (the WAL index, where SQLite keeps the write lock) was removed or replaced")
	}
	if c == nil && (both || g.shm == nil) {
		c = differs(g.file, g.main, "the file at its path was replaced (renamed over, or removed and made again)")
	}
	if c == nil || g.seen.CompareAndSwap(nil, c) {
		return c
	}
	return g.seen.Load()
}

// differs returns the change what when path names another file than
// opened, or none; nil when it names opened, or cannot be looked at (an
// error other than a missing file says nothing about which file is there).
func differs(path string, opened os.FileInfo, what string) *fileChange {
	now, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fileChange{what: what, why: err.Error()}
	case err != nil:
		return nil
	case !os.SameFile(now, opened):
		return &fileChange{what: what, why: path + " is another file than the one opened (its device or inode differs)"}
	}
	return nil
}
