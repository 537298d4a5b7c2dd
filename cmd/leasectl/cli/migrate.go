package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// migrationJSON is one applied or rolled back migration.
type migrationJSON struct {
	Version    int64   `json:"version"`
	Source     string  `json:"source"`
	DurationMS float64 `json:"duration_ms"`
}

// migrateJSON is the output of migrate up and migrate down.
type migrateJSON struct {
	Status     string          `json:"status"`
	Dialect    string          `json:"dialect"`
	Direction  string          `json:"direction"`
	Migrations []migrationJSON `json:"migrations"`
	Version    int64           `json:"version"` // the schema version afterwards
}

// migrationStateJSON is one migration in migrate status.
type migrationStateJSON struct {
	Version   int64  `json:"version"`
	Source    string `json:"source"`
	State     string `json:"state"`      // applied or pending
	AppliedAt string `json:"applied_at"` // "" when pending
}

// migrateStatusJSON is the output of migrate status.
type migrateStatusJSON struct {
	Status     string               `json:"status"`
	Dialect    string               `json:"dialect"`
	Version    int64                `json:"version"` // highest applied, 0 for none
	Latest     int64                `json:"latest"`  // newest migration this leasectl knows
	Migrations []migrationStateJSON `json:"migrations"`
}

func convertResults(res []*goose.MigrationResult) []*gooseResult {
	var out []*gooseResult
	for _, r := range res {
		if r == nil || r.Source == nil {
			continue
		}
		out = append(out, &gooseResult{version: r.Source.Version, source: path.Base(r.Source.Path), duration: r.Duration})
	}
	return out
}

func toMigrationsJSON(res []*gooseResult) []migrationJSON {
	out := []migrationJSON{}
	for _, r := range res {
		out = append(out, migrationJSON{Version: r.version, Source: r.source, DurationMS: float64(r.duration.Microseconds()) / 1000})
	}
	return out
}

// openMigrationDB opens a *sql.DB for migrations and checks it answers.
func (a *app) openMigrationDB(ctx context.Context) (target, *sql.DB, error) {
	t, err := a.target()
	if err != nil {
		return t, nil, err
	}
	if t.remote {
		return t, nil, usageError("migrate: %s is a served store: migrate its database (the DSN leasectl serve was given)", t.shown)
	}
	var db *sql.DB
	if t.dialect == migrations.SQLite {
		db, err = sqlite.OpenDB(t.path)
	} else {
		db, err = a.openPostgresMigrationDB(ctx, t)
	}
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return t, nil, err
		}
		if t.dialect == migrations.Postgres {
			err = postgres.ConnectionError(err)
		}
		return t, nil, a.storeError(t, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if t.dialect == migrations.Postgres {
			err = postgres.ConnectionError(err)
		}
		return t, nil, a.storeError(t, err)
	}
	return t, db, nil
}

// openPostgresMigrationDB opens the *sql.DB of a PostgreSQL DSN for
// migrations. Migrations take a session-level lock (goose's locker), which
// a pooler that does not keep sessions would leave on a server connection
// other clients use: such a pooler, named by the DSN's pooler parameter or
// found as the backend finds it (the server's process id differs from the
// one the connection was given), is refused. pooler=session is taken out
// of the DSN (the server does not know it) and migrations run.
func (a *app) openPostgresMigrationDB(ctx context.Context, t target) (*sql.DB, error) {
	c, err := pgx.ParseConfig(t.raw)
	if err != nil {
		// Bad input, as postgres.Open answers it (exit 2): a retry cannot help.
		return nil, &protocol.Error{Status: protocol.StatusInvalid, Err: err, Message: "postgres: parse dsn"}
	}
	refuse := func(how string) error {
		return usageError("migrate: the DSN goes through a connection pooler that does not keep sessions (%s): "+
			"migrations hold a session lock, so run them on a direct connection to the server", how)
	}
	mode, err := postgres.DSNPooler(c)
	if err != nil {
		return nil, usageError("migrate: %s", describeErr(err))
	}
	switch mode {
	case postgres.PoolerTransaction:
		return nil, refuse(fmt.Sprintf("%s=%s; use the DSN without it", postgres.PoolerParam, mode))
	case postgres.PoolerDetect:
		conn, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			return nil, err
		}
		pooled, err := postgres.ThroughPooler(ctx, conn)
		_ = conn.Close(ctx)
		if err != nil {
			return nil, err
		}
		if pooled {
			return nil, refuse(fmt.Sprintf("found by the server process id; a pooler in session mode keeps them: add %s=%s to its DSN",
				postgres.PoolerParam, postgres.PoolerSession))
		}
	}
	return stdlib.OpenDB(*c), nil
}

// missingSQLite reports whether t names a SQLite file (a plain path) that
// does not exist: migrate status and down report it as unmigrated instead
// of creating it.
func missingSQLite(t target) bool {
	if t.dialect != migrations.SQLite || strings.HasPrefix(t.path, "file:") {
		return false
	}
	_, err := os.Stat(t.path)
	return errors.Is(err, fs.ErrNotExist)
}

// pendingMigrations lists the embedded migrations of d, all pending: the
// status of a store that does not exist yet.
func pendingMigrations(d migrations.Dialect) ([]migrationStateJSON, error) {
	fsys, err := migrations.FS(d)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := []migrationStateJSON{}
	for _, name := range names {
		digits, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: no version prefix", name)
		}
		out = append(out, migrationStateJSON{Version: v, Source: name, State: string(goose.StatePending)})
	}
	return out, nil
}

// migrationError classifies a failure after the database answered: timeout
// when the deadline passed (a migration that builds an index on a large
// table, or another deploy holding the migration lock: raise --timeout);
// forbidden (exit 7, as for every command) when PostgreSQL refused the
// DSN's role a privilege the migrations need, naming the fix
// (postgres.MigrationError), or the role may not use the schema
// (migrations.ErrSchemaUnusable); unavailable (exit 5, as for every
// command) when the SQLite file is read-only (sqlite.MigrationError);
// otherwise a plain error (exit 1), as when
// another schema of the search_path holds the store
// (migrations.ErrStoreInAnotherSchema: no privilege is missing, and a retry
// does not fix it).
func migrationError(ctx context.Context, t target, err error) error {
	if ctx.Err() != nil {
		return &failure{status: string(protocol.StatusTimeout), err: fmt.Errorf("migrate %s: --timeout passed (a "+
			"migration that builds an index on a large table takes longer, version 6 seconds a few million rows, and "+
			"another deploy may hold the schema's migration lock while it migrates: raise --timeout, e.g. --timeout 10m; "+
			"an index build cut short is redone by the next migrate up): %w", t.shown, err)}
	}
	if errors.Is(err, migrations.ErrSchemaUnusable) {
		return &failure{status: StatusForbidden, err: err, msg: fmt.Sprintf("%s: migrate %s: %v", StatusForbidden, t.shown, err)}
	}
	if t.dialect == migrations.SQLite {
		if refused := sqlite.MigrationError(ctx, t.path, err); refused != nil {
			status := string(protocol.StatusOf(refused))
			return &failure{status: status, err: refused, msg: fmt.Sprintf("%s: migrate %s: %s", status, t.shown, describeErr(refused))}
		}
	}
	if t.dialect == migrations.Postgres {
		if refused := postgres.MigrationError(err); refused != nil {
			status := authStatus(refused)
			return &failure{status: status, err: refused, msg: fmt.Sprintf("%s: migrate %s: %s", status, t.shown, describeErr(refused))}
		}
	}
	return &failure{status: StatusError, err: fmt.Errorf("migrate %s: %w", t.shown, err)}
}

// schemaVersion returns the status of this release's migrations and the
// highest applied migration version, also one newer than this release
// knows (which the status does not list).
func schemaVersion(ctx context.Context, d migrations.Dialect, db *sql.DB) ([]*goose.MigrationStatus, int64, error) {
	st, err := migrations.Status(ctx, d, db)
	if err != nil {
		return nil, 0, err
	}
	v, err := migrations.DBVersion(ctx, d, db)
	if err != nil {
		return nil, 0, err
	}
	return st, v, nil
}

func (a *app) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, roll back or show the schema migrations",
		Long: `Manage leasestore's schema with its embedded goose migrations. The version
table is leasestore_goose_db_version, so a team's own goose table is left alone.
On PostgreSQL the objects go to the connection's current schema (set
search_path, e.g. with options=-csearch_path%3Dleasestore in the DSN);
migrate up creates that schema when it does not exist yet (the user needs
CREATE on the database; otherwise the error names the CREATE SCHEMA for a
DBA to run). Concurrent migrations of one schema wait on an advisory lock.

--timeout bounds the whole command: raise it when another deploy may be
holding the migration lock.`,
		Example: `  leasectl migrate up --dsn postgres://leasestore@db:5432/leases
  leasectl migrate status -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("migrate: unknown subcommand %q: want up, down or status", args[0])
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			return usageError("migrate: expected a subcommand: up, down or status")
		},
	}
	cmd.AddCommand(a.migrateUpCommand(), a.migrateDownCommand(), a.migrateStatusCommand())
	return cmd
}

func (a *app) migrateUpCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "up",
		Short:   "Apply every pending migration",
		Example: `  leasectl migrate up --dsn "postgres://leasestore@db:5432/leases?options=-csearch_path%3Dleasestore"`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if t, err := parseDSN(a.dsn()); err == nil && t.etcd != nil {
				return a.migrateEtcd(cmd.Context(), t, "up", false)
			}
			ctx, cancel := a.opContext(cmd.Context())
			defer cancel()
			t, db, err := a.openMigrationDB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if t.dialect == migrations.Postgres {
				created, err := migrations.EnsureSchema(ctx, db)
				if err != nil {
					return migrationError(ctx, t, err)
				}
				if created != "" {
					a.log.Info("created schema "+created+", the first of the connection's search_path", "schema", created)
				}
			}
			res, err := migrations.Up(ctx, t.dialect, db)
			if err != nil {
				return migrationError(ctx, t, err)
			}
			_, v, err := schemaVersion(ctx, t.dialect, db)
			if err != nil {
				return migrationError(ctx, t, err)
			}
			a.printMigrated(t, "up", convertResults(res), v)
			return nil
		},
	}
}

func (a *app) migrateDownCommand() *cobra.Command {
	var destroyData, dropLockDelays bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Roll back the most recent migration",
		Long: `Roll back the most recent migration.

Rolling back the first migration drops every leasestore table. On a store
that holds leases or audit records, or has issued a fencing token, it is
refused (exit 2, nothing written) unless --destroy-data is given.
--destroy-data destroys, with no undo: every lease, the whole audit trail,
and the fencing counter, so tokens start again at 1 and resources that saw
higher tokens will refuse every new holder. Rolling back the lock-delay
migration (version 4) while a lease carries a lock-delay (a held one, or
one that ended and still keeps its key) is refused the same way: the
release before it would let such a key be acquired at once. Stop the
holders and wait until the time the refusal names, or give
--drop-lock-delays to drop them. Stop the services that use the store
first.`,
		Example: `  leasectl migrate down --dsn sqlite:scratch.db
  leasectl migrate down --destroy-data --dsn sqlite:scratch.db`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if t, err := parseDSN(a.dsn()); err == nil && missingSQLite(t) {
				a.printMigrated(t, "down", nil, 0)
				return nil
			} else if err == nil && t.etcd != nil {
				return a.migrateEtcd(cmd.Context(), t, "down", destroyData)
			}
			ctx, cancel := a.opContext(cmd.Context())
			defer cancel()
			t, db, err := a.openMigrationDB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			var opts []migrations.DownOption
			if destroyData {
				opts = append(opts, migrations.DestroyData())
			}
			if dropLockDelays {
				opts = append(opts, migrations.DropLockDelays())
			}
			var done []*gooseResult
			res, err := migrations.Down(ctx, t.dialect, db, opts...)
			switch {
			case errors.Is(err, goose.ErrNoNextVersion), errors.Is(err, migrations.ErrNothingApplied):
				// nothing applied: nothing to roll back
			case errors.Is(err, migrations.ErrStoreNotEmpty), errors.Is(err, migrations.ErrLockDelaysInForce),
				errors.Is(err, migrations.ErrNewerSchema):
				// Refused for want of a flag, or a schema a newer release
				// migrated (its leasectl rolls it back), and nothing was
				// written: invalid (exit 2).
				return &failure{status: string(protocol.StatusInvalid), err: fmt.Errorf("migrate %s: %w", t.shown, err)}
			case err != nil:
				return migrationError(ctx, t, err)
			default:
				done = convertResults([]*goose.MigrationResult{res})
			}
			_, v, err := schemaVersion(ctx, t.dialect, db)
			if err != nil {
				return migrationError(ctx, t, err)
			}
			a.printMigrated(t, "down", done, v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&destroyData, "destroy-data", false,
		"allow rolling back the first migration of a store that holds data: destroys every lease, the whole audit trail "+
			"and the fencing counter (tokens start again at 1, so resources that saw higher tokens will refuse new holders); "+
			"and the lock-delay migration while lock-delays are in force, dropping them")
	cmd.Flags().BoolVar(&dropLockDelays, "drop-lock-delays", false,
		"allow rolling back the lock-delay migration (version 4) while leases carry lock-delays: drops them (keys they keep "+
			"can be acquired at once), nothing else")
	return cmd
}

func (a *app) printMigrated(t target, direction string, res []*gooseResult, version int64) {
	if a.output == "json" {
		a.printJSON(migrateJSON{
			Status: StatusOK, Dialect: string(t.dialect), Direction: direction,
			Migrations: toMigrationsJSON(res), Version: version,
		})
		return
	}
	var b strings.Builder
	if len(res) == 0 {
		fmt.Fprintf(&b, "%s: nothing to %s; schema version %d\n", t.shown, map[string]string{"up": "apply", "down": "roll back"}[direction], version)
	}
	verb := map[string]string{"up": "applied", "down": "rolled back"}[direction]
	for _, r := range res {
		fmt.Fprintf(&b, "%s %s (version %d) in %s\n", verb, r.source, r.version, r.duration.Round(time.Microsecond))
	}
	if len(res) > 0 {
		fmt.Fprintf(&b, "%s: schema version %d\n", t.shown, version)
	}
	a.printText(b.String())
}

func (a *app) migrateStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Show which migrations are applied",
		Example: `  leasectl migrate status --dsn postgres://leasestore@db:5432/leases`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if t, err := parseDSN(a.dsn()); err == nil && t.etcd != nil {
				return a.migrateEtcd(cmd.Context(), t, "status", false)
			}
			if t, err := parseDSN(a.dsn()); err == nil && missingSQLite(t) {
				ms, err := pendingMigrations(t.dialect)
				if err != nil {
					return err
				}
				return a.printMigrateStatus(t, migrateStatusJSON{Status: StatusOK, Dialect: string(t.dialect),
					Latest: migrations.LatestVersion, Migrations: ms},
					"the file does not exist yet: 'leasectl migrate up' (or any lease command) creates and migrates it")
			}
			ctx, cancel := a.opContext(cmd.Context())
			defer cancel()
			t, db, err := a.openMigrationDB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			st, v, err := schemaVersion(ctx, t.dialect, db)
			if err != nil {
				return migrationError(ctx, t, err)
			}
			out := migrateStatusJSON{Status: StatusOK, Dialect: string(t.dialect), Version: v,
				Latest: migrations.LatestVersion, Migrations: []migrationStateJSON{}}
			for _, s := range st {
				m := migrationStateJSON{State: string(s.State)}
				if s.Source != nil {
					m.Version, m.Source = s.Source.Version, path.Base(s.Source.Path)
				}
				if s.State == goose.StateApplied && !s.AppliedAt.IsZero() {
					m.AppliedAt = timeJSON(s.AppliedAt)
				}
				out.Migrations = append(out.Migrations, m)
			}
			return a.printMigrateStatus(t, out, "")
		},
	}
}

// printMigrateStatus prints the output of migrate status; note, when not
// empty, follows the first line of the table.
func (a *app) printMigrateStatus(t target, out migrateStatusJSON, note string) error {
	if a.output == "json" {
		a.printJSON(out)
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): schema version %d, latest known %d\n", t.shown, t.dialect, out.Version, out.Latest)
	if note != "" {
		b.WriteString(note + "\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tMIGRATION\tSTATE\tAPPLIED AT")
	for _, m := range out.Migrations {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", m.Version, m.Source, m.State, m.AppliedAt)
	}
	_ = tw.Flush()
	a.printText(b.String())
	return nil
}
