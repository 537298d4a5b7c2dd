package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// closedError is the refusal of a call (op) that finds the Backend closed
// (Close began): closed, the status of a closed store, as nothing is read
// or written.
func (b *Backend) closedError(op protocol.Op) error { return b.closedBy(op, nil) }

// closedBy is closedError with cause, the error of a statement that
// Close closed under a call.
func (b *Backend) closedBy(op protocol.Op, cause error) error {
	return backendkit.NewError(op, protocol.StatusClosed, cause, "sqlite database %q: the backend was closed", b.file)
}

// callRefusal returns the refusal of a call (op) at its start, before it
// reads anything: closed once Close began, or that of a Backend whose
// path no longer names the files it opened (fileGuard.checkRead: a stat,
// at most every millisecond); nil otherwise. Writes are refused where
// they run (writeAlone, writeBatch).
func (b *Backend) callRefusal(op protocol.Op) error {
	if b.closed.Load() {
		return b.closedError(op)
	}
	return b.guard.checkRead(op)
}

// interpret is [interpretError] for b's file. A statement that failed
// because Close closed it or the *sql.DB under it (a call that began
// before Close) answers closed, as a call after Close does. SQLite's
// complaint about a table or column the statement names is first checked
// against the file's schema version, and so is the refusal of a newer
// schema's serving guard: a schema migrated down (or up past what this
// release serves) under a running release is refused naming both versions
// and the fix, as Open and Health refuse it.
func (b *Backend) interpret(ctx context.Context, op protocol.Op, err error) error {
	return b.interpretIn(ctx, op, b.db, err)
}

// interpretIn is interpret for an error met in a write transaction still
// open (q is its *sql.Tx) or outside one (q is b.db): the schema version is
// read through q, since on a *sql.DB limited to MinOpenConns with a waiter
// the transaction holds the one connection a read on b.db would wait for.
func (b *Backend) interpretIn(ctx context.Context, op protocol.Op, q rowQuerier, err error) error {
	if b.closed.Load() && closedHandle(err) {
		return b.closedBy(op, err)
	}
	if missingSchemaObject(err) || servingGuard(err) {
		if refusal, rerr := b.schemaRefusal(ctx, q); rerr == nil && refusal != nil {
			refusal.Op, refusal.Err = op, err
			return refusal
		}
	}
	return interpretError(ctx, op, b.file, err)
}

// missingSchemaObject reports whether err is SQLite's refusal of a
// statement that names a table or column the file does not have.
func missingSchemaObject(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_ERROR {
		return false
	}
	msg := se.Error()
	return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") ||
		strings.Contains(msg, "has no column named")
}

// servingGuard reports whether err is the refusal of a trigger that a
// newer schema added to keep the releases it cannot serve from writing (see
// [migrations.ServingGuardPrefix]).
func servingGuard(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT &&
		strings.Contains(se.Error(), migrations.ServingGuardPrefix)
}

// DBError interprets an error of a *sql.DB made by [OpenDB] and used
// outside a Backend (migrations.Up, which leasectl runs on a file's first
// use) as a Backend's operation would, naming file: a full disk or the
// limit of open files answers unavailable naming the fix, and matches
// [ErrDiskFull] or [ErrTooManyOpenFiles]. nil stays nil.
func DBError(ctx context.Context, file string, err error) error {
	return interpretError(ctx, "", file, err)
}

// MigrationError interprets an error of a migration run outside a Backend
// (leasectl migrate, migrations.Up and Down on a *sql.DB of its own) on
// file: one SQLite refused because the file is read-only (mode=ro, or a
// file, -wal, -shm or directory this process cannot write) is unavailable
// with the message every other operation on such a file gives, its cause
// the driver's error alone (goose's "partial migration error" around it
// would read as if part of a migration had been applied; each runs in one
// transaction, rolled back). Any other error (nil too) gives nil: the
// caller reports it as it is.
func MigrationError(ctx context.Context, file string, err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_READONLY {
		return nil
	}
	return interpretError(ctx, "", file, se)
}

// interpretError is the one place where the SQLite backend turns driver and
// database/sql errors into the protocol's: an *[protocol.Error] with status
// timeout when the operation's deadline passed or the file stayed locked by
// another writer beyond the busy timeout (the effect of a state change is
// then unknown: retrying with the same request id tells), and unavailable
// otherwise, with a message naming the file (a change whose audit record
// was not written, errRecordMissing, names the trigger to drop, as does
// the refusal of a trigger the migrations did not make; a write of a
// transaction that another write's error rolled back, rolledBack, says so
// and then what that error means). A *protocol.Error (a version check,
// the schema check) passes through with op filled in.
func interpretError(ctx context.Context, op protocol.Op, file string, err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("sqlite database %q", file)
	var rb *rolledBack
	if errors.As(err, &rb) {
		return rolledBackError(ctx, op, where, file, rb.err)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Op == "" {
			pe.Op = op
		}
		return pe
	}
	if errors.Is(err, errRecordMissing) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the change was not committed, as its audit record was not written (a trigger on leasestore_audit "+
				"drops it: one the store's migrations did not make, which Health names): drop that trigger "+
				"(DROP TRIGGER name, with the sqlite3 shell)", where)
	}
	if errors.Is(ctx.Err(), context.Canceled) || (ctx.Err() == nil && errors.Is(err, context.Canceled)) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the caller cancelled the operation before it finished", where)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the deadline passed before the operation finished", where)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s stayed locked by another writer beyond the busy timeout", where)
		case sqlite3.SQLITE_INTERRUPT:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the operation was interrupted", where)
		case sqlite3.SQLITE_CANTOPEN:
			if e := exhausted(op, where, file, err); e != nil {
				return e
			}
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"%s cannot be opened: check that the path names a file in an existing, writable directory", where)
		case sqlite3.SQLITE_READONLY:
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"%s is read-only (opened with mode=ro or immutable=1, PRAGMA query_only is on, or this process cannot "+
					"write the file, its -wal and -shm files or its directory): writes need it writable", where)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s is not a database or is corrupt", where)
		case sqlite3.SQLITE_FULL:
			return diskFull(op, where, file, err)
		case sqlite3.SQLITE_IOERR:
			if e := exhausted(op, where, file, err); e != nil {
				return e
			}
			return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: disk I/O error", where)
		case sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"%s: permission denied: give this process read and write access to the file, its -wal and "+
					"-shm files and its directory", where)
		case sqlite3.SQLITE_CONSTRAINT:
			if foreignTrigger(se) {
				return backendkit.NewError(op, protocol.StatusUnavailable, err,
					"%s: a trigger that the store's migrations did not make refused the write (its message follows): "+
						"drop it (DROP TRIGGER name, with the sqlite3 shell; Health names it)", where)
			}
		case sqlite3.SQLITE_ERROR:
			if strings.Contains(se.Error(), "no such table") {
				e := sqlstore.SchemaVersionError(0, migrations.LatestVersion, where)
				e.Op, e.Err = op, err
				return e
			}
		}
	}
	if closedHandle(err) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the backend was closed", where)
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s", where)
}

// closedHandle reports whether err is database/sql's refusal of a closed
// statement, connection or *sql.DB.
func closedHandle(err error) bool {
	return errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) || strings.Contains(err.Error(), "database is closed") ||
		strings.Contains(err.Error(), "statement is closed")
}

// shmRegion is the size by which SQLite grows a file's -shm index, the
// least room a connection to a WAL file may need to open it.
const shmRegion = 32 << 10

// exhausted returns the error of err, SQLite's failure to open or write
// file (SQLITE_CANTOPEN, SQLITE_IOERR), when the cause is a resource the
// process ran out of; nil when it is not, or cannot be told. SQLite keeps
// the errno of such a failure to itself (an -shm file that cannot grow on
// a full disk is SQLITE_IOERR_SHMSIZE, a descriptor refused is
// SQLITE_CANTOPEN), so this asks the operating system, on this failure
// path only: whether opening a file now fails with EMFILE or ENFILE, and
// whether the file system holding file has less room left than an -shm
// region or no inode left.
func exhausted(op protocol.Op, where, file string, err error) error {
	switch errno := openProbe(); {
	case errors.Is(errno, syscall.EMFILE):
		limit := "its limit of open files"
		if n, ok := openFilesLimit(); ok {
			limit = fmt.Sprintf("its limit of open files (%d)", n)
		}
		return backendkit.NewError(op, protocol.StatusUnavailable, &exhaustion{kind: ErrTooManyOpenFiles, err: err},
			"%s cannot be opened: the process is at %s: raise it (ulimit -n, LimitNOFILE= under systemd)", where, limit)
	case errors.Is(errno, syscall.ENFILE):
		return backendkit.NewError(op, protocol.StatusUnavailable, &exhaustion{kind: ErrTooManyOpenFiles, err: err},
			"%s cannot be opened: the system is at its limit of open files: raise it (sysctl fs.file-max) "+
				"or stop processes that hold many", where)
	}
	if file == "" || file == "(in memory)" {
		return nil
	}
	if room, inodes, ok := fileSystemRoom(filepath.Dir(file)); ok && (room < shmRegion || inodes == 0) {
		return diskFull(op, where, file, err)
	}
	return nil
}

// healthRoom is the room on the file system holding the file below which
// Health answers that the disk is full: a write needs a WAL frame for
// every page it touches, and one that cannot grow the WAL fails.
const healthRoom = 1 << 20

// roomError is Health's error when the file system holding file (not an
// in-memory store) has less than healthRoom left, or no inode: the disk is
// full, for writes if not yet for reads. nil when there is room, or when
// the room cannot be told (not Linux).
func roomError(file string) error {
	if file == "" || file == "(in memory)" {
		return nil
	}
	room, inodes, ok := fileSystemRoom(filepath.Dir(file))
	if !ok || (room >= healthRoom && inodes > 0) {
		return nil
	}
	return diskFull(protocol.OpHealth, fmt.Sprintf("sqlite database %q", file), file,
		fmt.Errorf("%d KiB and %d inodes left, fewer than a write may need", room>>10, inodes))
}

// diskFull is the error of err, a write or an open of file refused for
// want of room on its file system.
func diskFull(op protocol.Op, where, file string, err error) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, &exhaustion{kind: ErrDiskFull, err: err},
		"%s: the disk is full: free space on the file system holding %s", where, filepath.Dir(file))
}

// rolledBack is the error of the writes of a transaction that err, the
// error of one of them, rolled back whole, so that none of them can be
// committed (see inSavepoint). It never leaves the package.
type rolledBack struct{ err error }

func (e *rolledBack) Error() string {
	return "the transaction was rolled back by one write's error: " + e.err.Error()
}

// rolledBackError is interpretError's answer (where names file) to a
// write of a transaction that cause, the error of one of its writes,
// rolled back whole: unavailable (timeout when cause is one), saying so,
// then what cause means and its fix.
func rolledBackError(ctx context.Context, op protocol.Op, where, file string, cause error) error {
	var pe *protocol.Error
	if !errors.As(interpretError(ctx, op, file, cause), &pe) {
		pe = backendkit.NewError(op, protocol.StatusUnavailable, cause, "%s", where)
	}
	st := protocol.StatusUnavailable
	if pe.Status == protocol.StatusTimeout {
		st = protocol.StatusTimeout
	}
	msg := where + ": one write's error rolled back the whole transaction, so none of its writes was committed " +
		"(retry with the same request id)"
	if detail := strings.TrimPrefix(strings.TrimPrefix(pe.Message, where), ": "); detail != "" {
		msg += ": " + detail
	}
	return backendkit.NewError(op, st, pe.Err, "%s", msg)
}

// noSavepoint reports whether err is SQLite's refusal to roll back to or
// release a savepoint that is gone: its transaction was rolled back.
func noSavepoint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_ERROR && strings.Contains(se.Error(), "no such savepoint")
}

// foreignTrigger reports whether se is the refusal of a trigger that the
// store's migrations did not make: a RAISE whose message does not name the
// store's tables, as the refusals of its own triggers (and of a newer
// schema's serving guard) do.
func foreignTrigger(se *sqlite.Error) bool {
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_TRIGGER && !strings.Contains(se.Error(), "leasestore_")
}

// errRecordMissing is the error of a change whose audit record's INSERT
// wrote no row, which interpretError turns into unavailable naming the
// fix. It never leaves the package.
var errRecordMissing = errors.New("sqlite: the INSERT of the audit record wrote no row")

// ErrDiskFull is matched (errors.Is) by the error of an operation that
// failed because the file system holding the SQLite file is full.
var ErrDiskFull = errors.New("sqlite: the disk is full")

// ErrTooManyOpenFiles is matched (errors.Is) by the error of an operation
// that failed because the process or the system is at its limit of open
// files.
var ErrTooManyOpenFiles = errors.New("sqlite: too many open files")

// exhaustion is the cause of an operation that failed for want of a
// resource: err as it is, matching kind too.
type exhaustion struct{ kind, err error }

func (e *exhaustion) Error() string   { return e.err.Error() }
func (e *exhaustion) Unwrap() []error { return []error{e.kind, e.err} }

// isReadOnly reports whether err is SQLite's SQLITE_READONLY.
func isReadOnly(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

// ErrFileReplaced is matched (errors.Is) by the error of every operation
// of a Backend that found its database file, or the file's -shm, no longer
// at its path as it opened them: it refuses every operation until it is
// restarted (see [Backend.Health]). Such an error matches
// [protocol.ErrRestartRequired] too: no retry mends it.
var ErrFileReplaced = errors.New("sqlite: the database file or its -shm was replaced under a running backend")

// replacedError is the refusal of op by a Backend whose file (its path
// file) is no longer the one it opened: c says which changed and how.
func replacedError(op protocol.Op, file string, c *fileChange) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, c,
		"sqlite database %q: %s since this backend opened it, so the backend no longer serves the store that other "+
			"processes open at that path and would issue the fencing tokens they issue: it refuses every operation until "+
			"restarted. Restart it against the file now at the path, after raising the fencing counter (leasectl fencing "+
			"raise) if that file was put back from a copy; stop the services before putting a file back, and never remove "+
			"the -wal or -shm of a file in use", file, c.what)
}

// fileChange is the cause of replacedError: what changed (for the
// message), and why says so (a failed stat, another file at the path);
// it matches [ErrFileReplaced] and [protocol.ErrRestartRequired].
type fileChange struct{ what, why string }

func (c *fileChange) Error() string   { return c.why }
func (c *fileChange) Unwrap() []error { return []error{ErrFileReplaced, protocol.ErrRestartRequired} }

// triggersError is the refusal (op) of the file at file, in which the
// triggers missing are missing and those altered differ from what their
// migrations created: it names each, what its absence allows and the fix.
func triggersError(op protocol.Op, file string, missing, altered []migrations.Trigger) *protocol.Error {
	var what, from []string
	effects := map[string]bool{}
	var order []string
	note := func(t migrations.Trigger, how string) {
		what = append(what, t.Name+" "+how)
		from = append(from, t.Name+": "+t.File)
		e := "the schema is not as its migrations made it"
		switch {
		case strings.HasPrefix(t.Name, "leasestore_audit_pruned"):
			e = "a prune leaves no mark for the followers behind it, which skip the removed records silently"
		case strings.HasPrefix(t.Name, "leasestore_audit_"):
			e = "the audit trail can be edited, emptied or replaced record by record"
		case strings.HasPrefix(t.Name, "leasestore_fencing_"):
			e = "the fencing counter can go back, and tokens be issued again"
		}
		if !effects[e] {
			effects[e] = true
			order = append(order, e)
		}
	}
	for _, t := range missing {
		note(t, "is missing")
	}
	for _, t := range altered {
		note(t, "differs from what its migration created")
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"sqlite database %q: triggers that keep the store's guarantees are not as the migrations made them (%s), so %s: "+
			"create each again with its migration's CREATE TRIGGER statement (%s; DROP TRIGGER an altered one first), "+
			"with the sqlite3 shell, or restore the file from a backup and raise the fencing counter (leasectl fencing raise); "+
			"leasectl migrate up recreates none of them, as the schema's version is unchanged",
		file, strings.Join(what, ", "), strings.Join(order, ", and "), strings.Join(from, ", "))
}

// foreignTriggersError is the refusal (op) of the file at file, on whose
// tables triggers are that its migrations did not make (each "NAME on
// TABLE").
func foreignTriggersError(op protocol.Op, file string, triggers []string) *protocol.Error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"sqlite database %q: triggers that the store's migrations did not make are on its tables (%s); such a trigger can change "+
			"or drop the store's writes (one that drops the trail's inserts makes the changes whose records it drops fail): "+
			"drop each (DROP TRIGGER name, with the sqlite3 shell), or put it on a table of your own",
		file, strings.Join(triggers, ", "))
}

// pruneWindowError is the refusal (op) of the file at file, in which a
// row of the prune window is committed: records before the time before
// (as stored, in microseconds) may be deleted.
func pruneWindowError(op protocol.Op, file string, before int64) *protocol.Error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"sqlite database %q: a row of leasestore_audit_prune (the prune window, for records before %s) "+
			"is committed, which no prune leaves behind (each opens and closes it inside its transactions), so any DELETE "+
			"of those audit records goes through: delete it (DELETE FROM leasestore_audit_prune, with the sqlite3 shell)",
		file, fromMicros(before).Format(time.RFC3339Nano))
}
