package cli

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers database/sql driver "pgx" for migrations

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// etcdDialect is the dialect of an etcd target, as migrate prints it.
const etcdDialect migrations.Dialect = "etcd"

// target is a parsed DSN.
type target struct {
	dialect migrations.Dialect
	raw     string       // as given: pgx connection string, or the sqlite: form
	path    string       // SQLite file path
	shown   string       // fit for messages: password masked
	remote  bool         // http:// or https://: a store served by leasectl serve (dialect unset)
	etcd    *etcd.Config // etcd:// or etcds://: an etcd cluster (dialect unset)
}

// parseDSN recognises postgres://, postgresql://, libpq's key=value form
// (host=... user=... dbname=...), sqlite:PATH (a plain PATH holding no
// '?', or a file: URI with SQLite's parameters), etcd:// or etcds:// (an
// etcd cluster, see etcd.ParseDSN), and http:// or https:// (a store
// served by leasectl serve). Any other form is invalid
// input, and so is a postgres URL that pgx would read with part of its
// password elsewhere (postgres.CheckDSN); the message repeats the DSN only when it is a bare file path
// (suggesting sqlite:PATH), never what may hold a password in a form
// leasectl does not know how to mask.
func parseDSN(dsn string) (target, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), isKeyValueDSN(dsn):
		if err := postgres.CheckDSN(dsn); err != nil {
			// An '@' of the password written as is: pgx would read the
			// rest of the password as the host, which its errors name.
			return target{}, usageError("%s", describeErr(err))
		}
		return target{dialect: migrations.Postgres, raw: dsn, shown: redactDSN(dsn)}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return target{}, usageError("dsn: sqlite: needs a file path, as in sqlite:leasestore.db")
		}
		if name, ok := strings.CutPrefix(path, "//"); ok && name != "" && !strings.HasPrefix(name, "/") {
			// The URL habit (sqlite://leases.db) names /leases.db, at the
			// root of the file system; sqlite:///abs/path stays the path.
			return target{}, usageError("dsn: %s names the file /%s at the root of the file system: "+
				"write sqlite:%s for a file in the working directory (or sqlite:/%s if you mean the root)", dsn, name, name, name)
		}
		if name, query, ok := strings.Cut(path, "?"); ok && !strings.HasPrefix(path, "file:") {
			// The URI habit: a plain path is a file name, so the query
			// would be part of a new file's name (the backend escapes it).
			return target{}, usageError("dsn: %s: a plain path after sqlite: takes no parameters (this would name a new file "+
				"called %q): write sqlite:file:%s?%s for SQLite's URI parameters (and %%3F for a '?' in a file name)",
				dsn, path, name, query)
		}
		if name, ok := strings.CutPrefix(path, "~/"); ok {
			// The shell expands ~ only at the start of a word.
			return target{}, usageError("dsn: %s: the shell does not expand ~ after sqlite:, so this names a directory "+
				"called \"~\": write sqlite:$HOME/%s (or sqlite:./~/%s if you mean that directory)", dsn, name, name)
		}
		if err := checkSQLiteDir(dsn, path); err != nil {
			return target{}, err
		}
		return target{dialect: migrations.SQLite, raw: dsn, path: path, shown: dsn}, nil
	case strings.HasPrefix(dsn, "http://"), strings.HasPrefix(dsn, "https://"):
		return target{raw: dsn, shown: redactDSN(dsn), remote: true}, nil
	case etcd.IsDSN(dsn):
		cfg, err := etcd.ParseDSN(dsn)
		if err != nil {
			return target{}, usageError("dsn: %v", err)
		}
		return target{dialect: etcdDialect, raw: dsn, shown: etcd.Redact(dsn), etcd: cfg}, nil
	case dsn == "":
		return target{}, usageError("dsn: empty")
	}
	if looksLikePath(dsn) {
		if scheme, rest, ok := strings.Cut(dsn, ":"); ok && isScheme(dsn, scheme) {
			// A mistyped scheme (sqlit:, SQLITE:, postgres:/): sqlite:DSN
			// would name a file under a directory called "scheme:".
			if l := strings.ToLower(scheme); strings.Contains(l, "sql") || strings.Contains(l, "lite") {
				return target{}, usageError("dsn: %q is not a form leasectl reads: for a SQLite file write sqlite:%s", dsn, rest)
			}
			return target{}, usageError("dsn: %q is not a form leasectl reads: %s", dsn, dsnForms)
		}
		return target{}, usageError("dsn: %q is not a DSN: for a SQLite file write sqlite:%s", dsn, dsn)
	}
	return target{}, usageError("dsn: unknown form: %s", dsnForms)
}

// dsnForms lists the DSN forms leasectl reads, for messages.
const dsnForms = "want postgres://USER@HOST:PORT/DB (or postgresql://), " +
	"key=value pairs (host=HOST user=USER dbname=DB), sqlite:PATH, etcd://HOST:PORT[,HOST:PORT...]/PREFIX, " +
	"or http://HOST:PORT (leasectl serve)"

// checkSQLiteDir refuses, as invalid input (exit 2), a sqlite:PATH whose
// directory does not exist or is a file, as the library's open does
// ([sqlite.CheckDirectory]), before any command makes anything: no store
// can be there, and no retry helps. The message names the directory and
// the fix.
func checkSQLiteDir(dsn, path string) error {
	var pe *protocol.Error
	if err := sqlite.CheckDirectory(path); errors.As(err, &pe) {
		return usageError("dsn: %s: %s", dsn, strings.TrimPrefix(pe.Message, "sqlite: "))
	}
	return nil
}

// isScheme reports whether scheme, the text of dsn before its first
// colon, is dsn's URL scheme as net/url reads one (RFC 3986), two
// characters at least, so a Windows drive letter (C:) is not one.
func isScheme(dsn, scheme string) bool {
	u, err := url.Parse(dsn)
	return err == nil && len(scheme) >= 2 && strings.EqualFold(u.Scheme, scheme)
}

// isKeyValueDSN reports whether dsn is in libpq's key=value form: space
// separated pairs, the first of a key libpq knows.
func isKeyValueDSN(dsn string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(dsn), "=")
	if !ok {
		return false
	}
	switch strings.TrimSpace(key) {
	case "host", "hostaddr", "port", "user", "dbname", "password", "sslmode", "application_name",
		"connect_timeout", "options", "service", "passfile", "target_session_attrs":
		return true
	}
	return false
}

// looksLikePath reports whether s is a plain file path: safe to repeat in
// a message (no password can hide in it) and likely meant as sqlite:s.
func looksLikePath(s string) bool {
	if s == "" || strings.ContainsAny(s, " =@?&'\"") || strings.Contains(s, "://") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(s))
	return ext == ".db" || ext == ".sqlite" || ext == ".sqlite3" || strings.ContainsRune(s, filepath.Separator)
}

// target parses the DSN in effect (see dsn). When the DSN came from
// $LEASESTORE_DSN, its error says so: the operator typed no DSN and must
// learn where to fix it.
func (a *app) target() (target, error) {
	t, err := parseDSN(a.dsn())
	if err != nil && a.dsnFlag == "" && a.getenv(EnvDSN) != "" {
		return t, usageError("%w (the DSN of $%s: fix it there, or give --dsn)", err, EnvDSN)
	}
	return t, err
}

// dsn returns the DSN in effect: --dsn, else $LEASESTORE_DSN, else DefaultDSN.
func (a *app) dsn() string {
	if a.dsnFlag != "" {
		return a.dsnFlag
	}
	if v := a.getenv(EnvDSN); v != "" {
		return v
	}
	return DefaultDSN
}

// store is an open lease store: a runtime over a backend, the audit reader
// that reads through it, and what must be closed afterwards. Every read and
// change goes through the runtime (its deadline, closed state and
// observer), the backend's optional capabilities too (see [through]).
type store struct {
	rt      *protocol.Runtime
	audit   audit.Reader // audit.RuntimeReader(rt)
	backend string       // "postgres" or "sqlite"
	shown   string       // the DSN, password masked
	db      *sql.DB
	cpu     *cpuMeter // bench: the server processes of the pool, when measured
	// unchanged, when a SQLite file was opened immutable (read without
	// locks, see openSQLiteReadOnly), fails once the file may have changed
	// since it was opened, and otherwise returns the read's own error
	// (its argument); nil otherwise. A long read checks it after each page,
	// before printing the page; a one-shot read after all its reads,
	// before its output is shown (see readOnce).
	unchanged func(error) error
}

// readOnce runs fn, a one-shot read of s that prints what it read, and
// returns fn's error. When s is a SQLite file read without locks
// (s.unchanged is set), fn's output is held back until s.unchanged
// vouches for every read fn made: if the file changed meanwhile (a writer
// checkpointed its commits into it between two of fn's queries, or under
// one), nothing fn printed is shown and the check's failure is returned.
func (a *app) readOnce(s *store, fn func() error) error {
	if s.unchanged == nil {
		return fn()
	}
	var held heldOutput
	stdout, stderr := a.stdout, a.stderr
	a.stdout, a.stderr = held.to(stdout), held.to(stderr)
	err := fn()
	a.stdout, a.stderr = stdout, stderr
	if changed := s.unchanged(nil); changed != nil {
		return changed
	}
	held.flush()
	return err
}

// heldOutput keeps what is written through its writers, in order, until
// flush writes it on.
type heldOutput struct{ chunks []heldChunk }

type heldChunk struct {
	w io.Writer
	b []byte
}

// to returns a writer whose writes h keeps for w.
func (h *heldOutput) to(w io.Writer) io.Writer { return heldWriter{h: h, w: w} }

// flush writes what h kept to the writers it was meant for.
func (h *heldOutput) flush() {
	for _, c := range h.chunks {
		_, _ = c.w.Write(c.b)
	}
	h.chunks = nil
}

type heldWriter struct {
	h *heldOutput
	w io.Writer
}

func (hw heldWriter) Write(p []byte) (int, error) {
	hw.h.chunks = append(hw.h.chunks, heldChunk{w: hw.w, b: bytes.Clone(p)})
	return len(p), nil
}

// access says what a command does to the store.
type access int

const (
	writeAccess access = iota // changes leases or the trail
	readAccess                // only reads: a SQLite file this user cannot write is opened read-only
	// followAccess only reads, and goes on reading while others write
	// (audit --follow, watch): as readAccess, but a SQLite file is never
	// opened immutable (openSQLiteReadOnly).
	followAccess
)

// openStore opens the store named by the DSN in effect for writing; see
// openStoreFor.
func (a *app) openStore(ctx context.Context) (*store, error) {
	return a.openStoreFor(ctx, writeAccess)
}

// openStoreFor opens the store named by the DSN in effect. A SQLite file is
// created and migrated if needed, or, for readAccess, opened read-only when
// this user cannot write it; PostgreSQL is never migrated here, and an
// unmigrated schema is refused by the backend with an error naming
// 'leasectl migrate up' (status unavailable, exit 5).
func (a *app) openStoreFor(ctx context.Context, acc access) (*store, error) {
	t, err := a.target()
	if err != nil {
		return nil, err
	}
	return a.openTarget(ctx, t, openOptions{access: acc})
}

// openOptions tunes openTarget.
type openOptions struct {
	observer protocol.Observer // on the runtime; nil for none
	maxConns int32             // PostgreSQL pool size unless the DSN sets pool_max_conns; 0 for pgxpool's default
	access   access            // writeAccess (the zero value) unless the command only reads
	// noCoalescing and maxInFlight set the backends' coalescing (bench):
	// off, and PostgreSQL's postgres.Config.MaxInFlight (0: the default).
	noCoalescing bool
	maxInFlight  int
	appName      string // PostgreSQL application_name unless the DSN sets one; "" for leasectl
	// lockDelays are the runtime's namespace defaults of the lock-delay
	// (serve --lock-delay), validated; nil for none.
	lockDelays []protocol.NamespaceLockDelay
}

// testObserver, set only by this package's tests (nil otherwise),
// observes the stores opened without an observer of their own: a test
// pauses a command there, between two of its operations.
var testObserver protocol.Observer

// testSweep, set only by this package's tests (the zero value, every
// default, otherwise), tunes the background sweep of the local stores
// opened here: a test has it sweep soon after a lease ended.
var testSweep protocol.SweepConfig

// openTarget opens t; see openStore.
func (a *app) openTarget(ctx context.Context, t target, opts openOptions) (*store, error) {
	ctx, cancel := a.opContext(ctx)
	defer cancel()
	a.log.Debug("opening store", "dsn", t.shown)
	cfg := &protocol.Config{DefaultTimeout: a.timeout, Observer: opts.observer, LockDelays: opts.lockDelays}
	if cfg.Observer == nil {
		cfg.Observer = testObserver
	}
	if t.remote {
		// The server sweeps its own store; a client's runtime has nothing to sweep.
		c, err := httpapi.NewClient(t.raw, &httpapi.ClientConfig{Token: a.getenv(EnvAPIToken)})
		if status := authStatus(err); status != "" {
			// A token that cannot be sent is a bad token, exit 7.
			return nil, &failure{status: status, err: err, msg: fmt.Sprintf("%s: %s: set %s to a token of the server's tokens file",
				status, a.red.redact(err.Error()), EnvAPIToken)}
		}
		if err != nil {
			return nil, &failure{status: string(protocol.StatusInvalid), err: errors.New(a.red.redact(err.Error()))}
		}
		return newStore(protocol.New(c, cfg), t, nil), nil
	}
	// A local store's background sweep logs through leasectl's logger
	// (its format, --log-level, redaction and stderr), not slog.Default.
	sweep := testSweep
	sweep.Logger = a.log
	cfg.Sweep = &sweep
	if t.etcd != nil {
		b, err := etcd.Open(ctx, t.etcd)
		if err != nil {
			return nil, a.storeError(t, err)
		}
		return newStore(protocol.New(b, cfg), t, nil), nil
	}
	switch t.dialect {
	case migrations.Postgres:
		var pcfg postgres.Config
		// Sessions show up as leasectl in pg_stat_activity, unless the DSN
		// names itself.
		if !dsnHasParam(t.raw, "application_name") {
			pcfg.ApplicationName = "leasectl"
			if opts.appName != "" {
				pcfg.ApplicationName = opts.appName
			}
		}
		if opts.maxConns > 0 && !dsnHasParam(t.raw, "pool_max_conns") {
			// At least 2: Open refuses a pool of one, where an operation
			// waiting for a locked key would hold the only connection.
			pcfg.MaxConns = max(opts.maxConns, 2)
		}
		pcfg.NoCoalescing, pcfg.MaxInFlight = opts.noCoalescing, opts.maxInFlight
		b, err := postgres.Open(ctx, t.raw, &pcfg)
		if err != nil {
			return nil, a.storeError(t, err)
		}
		return newStore(protocol.New(b, cfg), t, nil), nil
	default:
		var unchanged func(error) error
		db, b, err := a.openSQLite(ctx, t, opts.access, &sqlite.Config{NoCoalescing: opts.noCoalescing}, &unchanged)
		if err != nil {
			return nil, a.storeError(t, err)
		}
		s := newStore(protocol.New(b, cfg), t, db)
		s.unchanged = unchanged
		return s, nil
	}
}

// newStore returns the store of rt, opened from t; db is the *sql.DB
// leasectl opened for it (nil when none), closed after rt.
func newStore(rt *protocol.Runtime, t target, db *sql.DB) *store {
	return &store{rt: rt, audit: audit.RuntimeReader(rt), backend: rt.BackendName(), shown: t.shown, db: db}
}

// through calls fn with the store's backend as a T (an optional capability
// such as [protocol.Sweeper]) through the runtime, which observes it as op.
// ok is false, and fn is not called, when the backend is no T.
func through[T any](ctx context.Context, s *store, op protocol.Op, fn func(context.Context, T) error) (ok bool, err error) {
	err = s.rt.Do(ctx, op, func(ctx context.Context, b protocol.Backend) error {
		t, is := b.(T)
		if !is {
			return nil
		}
		ok = true
		return fn(ctx, t)
	})
	return ok, err
}

// dsnHasParam reports whether a postgres URL sets the query parameter name.
func dsnHasParam(dsn, name string) bool {
	u, err := url.Parse(dsn)
	return err == nil && u.Query().Has(name)
}

// sqliteAttempts bounds openSQLite's attempts.
const sqliteAttempts = 5

// openSQLite opens, migrates if needed, and wraps the SQLite file of t. It
// migrates a new or empty file and a leasestore store of an older schema,
// and refuses another application's database (sqlite.CheckFirstUse).
//
// SQLite has no migration lock, and a file that does not exist yet is
// switched to WAL by the first connection: two leasectl processes meeting a
// fresh file at the same moment can collide (SQLITE_BUSY before the busy
// timeout applies, or goose finding the version table created under it).
// The loser retries a few times and then finds the schema in place.
//
// A file this user can read but not write (or in a directory it cannot
// write, where SQLite cannot make its WAL files) is opened read-only for
// readAccess and followAccess, and refused with the reason for
// writeAccess. *unchanged is set when the file is opened immutable (see
// openSQLiteReadOnly).
func (a *app) openSQLite(ctx context.Context, t target, acc access, cfg *sqlite.Config, unchanged *func(error) error) (*sql.DB, *sqlite.Backend, error) {
	switch ro, err := sqliteReadOnly(t.path); {
	case err != nil:
		return nil, nil, err
	case ro && acc != writeAccess:
		return a.openSQLiteReadOnly(ctx, t, acc == followAccess, unchanged)
	case ro:
		return nil, nil, fmt.Errorf("sqlite: %s is read-only to this user: changing leases needs write access "+
			"to the file and its directory (reads such as get, list and audit work)", t.path)
	}
	for attempt := 1; ; attempt++ {
		db, b, retry, err := a.openSQLiteOnce(ctx, t, cfg)
		if err == nil {
			return db, b, nil
		}
		if !retry || attempt == sqliteAttempts || ctx.Err() != nil {
			return nil, nil, err
		}
		a.log.Debug("sqlite: opening collided with another process; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
		}
	}
}

// openSQLiteOnce is one attempt of openSQLite. retry reports whether the
// failure may be a collision with another process.
func (a *app) openSQLiteOnce(ctx context.Context, t target, cfg *sqlite.Config) (db *sql.DB, b *sqlite.Backend, retry bool, err error) {
	busy := func(err error) bool { return protocol.StatusOf(err) == protocol.StatusTimeout && ctx.Err() == nil }
	// First use migrates a new or empty file, never another application's
	// database: refused before OpenDB switches it to WAL.
	if err := sqlite.CheckFirstUse(ctx, t.path); err != nil {
		return nil, nil, busy(err), err
	}
	db, err = sqlite.OpenDB(t.path)
	if err != nil {
		return nil, nil, busy(err), err
	}
	res, err := migrations.Up(ctx, migrations.SQLite, db)
	if err != nil {
		_ = db.Close()
		if refused := sqlite.MigrationError(ctx, t.path, err); refused != nil {
			// A read-only file (mode=ro): the driver's refusal alone, not
			// goose's "partial migration error" around it (the migration
			// ran in one transaction, rolled back). No clash: no retry.
			return nil, nil, false, refused
		}
		err = sqlite.DBError(ctx, t.path, fmt.Errorf("store: migrate sqlite: %w", err))
		// A full disk or the limit of open files is no clash: another
		// attempt meets the same want.
		exhausted := errors.Is(err, sqlite.ErrDiskFull) || errors.Is(err, sqlite.ErrTooManyOpenFiles)
		return nil, nil, ctx.Err() == nil && !exhausted, err
	}
	if applied := convertResults(res); len(applied) > 0 {
		// One line, at debug: a fresh file is migrated on every first use.
		last := applied[len(applied)-1]
		a.log.Debug("migrated SQLite store", "file", t.path, "version", last.version, "migrations", len(applied))
	}
	b, err = sqlite.New(ctx, db, cfg)
	if err != nil {
		_ = db.Close()
		return nil, nil, busy(err), err
	}
	return db, b, false, nil
}

// sqliteReadOnly reports whether the SQLite file at path exists and this
// user cannot write it or its directory. It fails, saying so, when the
// file exists and cannot be read. A "file:" URI is left to SQLite, and
// a path naming no regular file to OpenDB, which refuses it.
func sqliteReadOnly(path string) (bool, error) {
	if strings.HasPrefix(path, "file:") {
		return false, nil
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		// Opening a named pipe to read it would block until a writer
		// comes: OpenDB refuses it, saying what it is.
		return false, nil
	}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, fs.ErrPermission):
		return false, fmt.Errorf("sqlite: %s: permission denied: this user cannot read the file (check its owner and mode)", path)
	case err != nil:
		return false, fmt.Errorf("sqlite: %w", err)
	}
	_ = f.Close()
	if !writable(path) {
		return true, nil
	}
	return !dirWritable(filepath.Dir(path)), nil
}

// openSQLiteReadOnly opens the file of t read-only, without migrating it:
// a file of an older schema is refused by the backend with an error naming
// 'leasectl migrate up'.
//
// A WAL file is read through its -wal and -shm files, which SQLite must
// create when no writer has the file open. In a directory this user
// cannot write it cannot; in one it may write, a read-only connection
// makes them as this user's and leaves them (it cannot checkpoint them
// away), and the store's owner then cannot write the store until someone
// removes them. While the -wal file is there (a writer has the file open,
// or left it), the files are read as they are, and later commits show:
// the read-only connection keeps them from being removed when the writers
// close, as any open connection does. When there is no -wal file (no
// writer has the file open, and every commit is in the main file) the
// file is opened immutable instead: read without locks and without the
// WAL, which is sound for as long as nobody writes meanwhile, and never
// shows a later commit. A one-shot read takes that; a follower (follow)
// is refused, naming what to do, rather than left waiting for commits it
// would never see. A writer that opens the file meanwhile checkpoints its
// commits into the file being read, under a page cache that never goes
// stale: a long read (audit export) then repeated records, skipped some,
// looped, or failed as "malformed". *unchanged is then set to a check
// that fails once the file changed since it was opened (its inode, size
// or modification time: an immutable read reads the main file only, so a
// -wal file a reader's or writer's open makes changes nothing read until a
// checkpoint writes the file), which a long read makes after each page,
// before printing it, and a one-shot read (readOnce) after its last query,
// before its output is shown: leasectl get, list, list -A, describe,
// namespaces and audit print one state of the store, or fail.
func (a *app) openSQLiteReadOnly(ctx context.Context, t target, follow bool, unchanged *func(error) error) (*sql.DB, *sqlite.Backend, error) {
	abs, err := filepath.Abs(t.path)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: %s: %w", t.path, err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true, RawQuery: "mode=ro"}
	a.log.Debug("sqlite: the file is read-only to this user; opening it read-only", "file", t.path)
	noWAL := func() bool { _, err := os.Stat(abs + "-wal"); return errors.Is(err, fs.ErrNotExist) }
	var db *sql.DB
	immutable := noWAL()
	if !immutable {
		db, err = sqlite.OpenDB(u.String())
		// The writers closed meanwhile, and their -wal file went with them.
		immutable = err != nil && noWAL()
	}
	if immutable {
		a.log.Debug("sqlite: no writer has the file open (no -wal file)", "file", t.path, "err", err)
		if follow {
			return nil, nil, fmt.Errorf("sqlite: %s: following it needs a read that sees other processes' commits, but "+
				"this user cannot write the file or its directory and no process has it open now (there is no -wal "+
				"file): SQLite would have to make the -wal and -shm files, which this user cannot (or, in a directory "+
				"it may write, would make as its own, and the store's owner could then not write), so it could only "+
				"be read as it is now and no later commit would show. Start following while a writer has the store "+
				"open (the service using it, or leasectl serve; the follower then sees every later commit, also once "+
				"that writer has exited), give this user write access to the file and its directory, or follow a "+
				"served store (--dsn http://...)", t.path)
		}
		a.log.Debug("sqlite: reading the file without locks", "file", t.path)
		// Not sqlite.OpenDB: an immutable file reports journal mode
		// "delete", which OpenDB refuses for want of WAL; nothing writes
		// through this handle, so WAL's concurrency does not matter.
		u.RawQuery = "mode=ro&immutable=1"
		var opened os.FileInfo
		if opened, err = os.Stat(abs); err == nil {
			*unchanged = fileUnchanged(t.path, abs, opened)
			db, err = sql.Open("sqlite", u.String())
		}
		if err == nil {
			if err = db.PingContext(ctx); err != nil {
				_ = db.Close()
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, b, nil
}

// fileUnchanged returns a check that fails, naming what to do, when the
// SQLite file at abs (shown as path) is no longer as opened (its size,
// modification time or inode differ): another process wrote it since, and
// what an immutable read reads may mix its commits; otherwise it returns
// the read's own error (cause) as it is. It
// is checked after the reads it vouches for, so a change that comes later
// than the check does not touch them.
func fileUnchanged(path, abs string, opened os.FileInfo) func(cause error) error {
	return func(cause error) error {
		fi, err := os.Stat(abs)
		if err == nil && os.SameFile(fi, opened) && fi.Size() == opened.Size() && fi.ModTime().Equal(opened.ModTime()) {
			return cause
		}
		// A read's own error then comes from the change (SQLite reads
		// the torn file as "malformed"), not from the store: not shown.
		return &failure{status: string(protocol.StatusUnavailable), err: fmt.Errorf("sqlite: %s changed while it "+
			"was being read without locks (this user cannot write the file or its directory, and no process had "+
			"it open when the read began, so SQLite's -wal and -shm files were not there to read it through): "+
			"another process has written it since, so what was read may mix its commits, and is not shown. Run "+
			"it again (it then reads the file as it is by then, or, while a writer has the store open, goes "+
			"through its -wal and -shm files and sees every commit), give this user write access to the file and "+
			"its directory (the store is then read with locks), or read a served store (--dsn http://...)", path)}
	}
}

// storeError wraps an open failure with the (masked) DSN and its status:
// timeout when the deadline passed, unauthorized or forbidden for a refusal
// of the DSN's credentials or their privileges (exit 7), the status of a
// *protocol.Error, unavailable otherwise.
func (a *app) storeError(t target, err error) error {
	status := string(protocol.StatusOf(err))
	if s := authStatus(err); s != "" {
		status = s // exit 7: the DSN's credentials or their privileges, no outage
	}
	return &failure{
		status: status,
		err:    fmt.Errorf("store: open %s: %w", t.shown, err),
		msg:    fmt.Sprintf("store: open %s: %s: %s", t.shown, status, describeErr(err)),
	}
}

// gooseResult is one applied or rolled back migration.
type gooseResult struct {
	version  int64
	source   string
	duration time.Duration
}

// close closes the runtime (and so the backend) and any *sql.DB leasectl
// opened for it. It logs instead of failing: the command's outcome is
// already decided.
func (s *store) close(a *app) {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	err := s.rt.Close(ctx)
	if s.db != nil {
		err = errors.Join(err, s.db.Close())
	}
	if err != nil {
		a.log.Warn("closing the store", "err", a.red.redact(err.Error()))
	}
}
