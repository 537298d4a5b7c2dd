package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/pgschema"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// requestConstraint is the unique constraint on (namespace, request_id) of
// leasestore_audit (see the migration).
const requestConstraint = "leasestore_audit_request"

// errRequestIDRace reports that a statement's audit insert met a concurrent
// writer of the same (namespace, request id): the statement was rolled back
// and must be run again, when its fresh snapshot will find the other
// writer's record. It never leaves the package.
var errRequestIDRace = errors.New("postgres: a concurrent request used the same request id")

// errSerialization reports a serialization failure or a deadlock (SQLSTATE
// 40001, 40P01): the server rolled the statement back, which happens under
// a default_transaction_isolation above read committed on a pool the
// backend does not own. Every statement is one transaction and carries its
// request id, so running it again is safe; the backend does, until it
// answers or the deadline passes. It never leaves the package.
var errSerialization = errors.New("postgres: serialization failure or deadlock")

// errAuditWentBack reports SQLSTATE LS001: a new audit record would sort
// before existing ones, after a move to another cluster (see the
// migration's leasestore_audit_new_era). Backend.runChange starts a new era
// and runs the statement again.
var errAuditWentBack = errors.New("postgres: audit ids went back: the database moved to another cluster")

// errKeyBusy reports SQLSTATE LS002: a batch found its operation's key
// locked by another transaction and did not run it (see changeBatchFnSQL);
// the operation runs alone. It never leaves the package.
var errKeyBusy = errors.New("postgres: the key is locked by another transaction")

// ConnectionError interprets an error of a connection to PostgreSQL made
// outside a Backend (leasectl migrate opens its own) as a Backend's open
// would: a database that does not exist, a refused role, a lost server
// each answer unavailable naming what to check. nil stays nil.
func ConnectionError(err error) error {
	if err == nil {
		return nil
	}
	return interpretError("", err)
}

// MigrationError interprets an error of a migration run outside a Backend
// (leasectl migrate, migrations.Up, Down and Status on a *sql.DB of its
// own): a permission error (42501) is unavailable matching
// [protocol.ErrForbidden], as a Backend's is (leasectl exits 7), its
// message naming the fix for a migration, which creates, alters and drops
// the store's objects: run it as the schema's owner, or GRANT CREATE ON
// the schema (the server refused to create in it), or GRANT CREATE ON the
// database (it refused to create the missing schema), or as the owner of
// the object the server named ("must be owner of ..."). Any other error
// (nil too) gives nil: the caller reports it as it is.
func MigrationError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		return nil
	}
	const owner = "run leasectl migrate as the schema's owner (or a role that is a member of it)"
	switch object, isOwner := strings.CutPrefix(pe.Message, "must be owner of "); {
	case isOwner:
		return forbidden("", err, "postgres: migrations alter and drop the store's objects, which only their owner may, and the "+
			"DSN's role does not own %s: run leasectl migrate as the role that ran the earlier migrations (or a role that is "+
			"a member of it) (docs/postgres-settings.md#privileges)", object)
	case strings.HasPrefix(pe.Message, "permission denied for schema "):
		name := strings.TrimPrefix(pe.Message, "permission denied for schema ")
		return forbidden("", err, "postgres: the DSN's role may not create objects in schema %s, as migrations do: %s, "+
			"or have the owner run GRANT CREATE ON SCHEMA %s TO it (docs/postgres-settings.md#privileges)",
			name, owner, pgschema.QuoteIdent(name))
	case strings.HasPrefix(pe.Message, "permission denied for database "):
		// migrate up creates the search_path's schema when it is missing;
		// there is no schema (nor owner) yet, so the fix is its creation.
		name := strings.TrimPrefix(pe.Message, "permission denied for database ")
		return forbidden("", err, "postgres: the DSN's role may not create schemas in database %s, as migrate up does when the "+
			"search_path's schema is missing: have it created (below), or have the database's owner run GRANT CREATE ON DATABASE %s "+
			"TO it (docs/postgres-settings.md#privileges)", name, pgschema.QuoteIdent(name))
	case strings.HasPrefix(pe.Message, "permission denied for "):
		return forbidden("", err, "postgres: the DSN's role lacks a privilege that migrations need on %s: %s "+
			"(docs/postgres-settings.md#privileges)", strings.TrimPrefix(pe.Message, "permission denied for "), owner)
	}
	// Not a privilege (the append-only triggers' refusal shares the code).
	return nil
}

// eraRowFix says how to put leasestore_audit_era's row back.
const eraRowFix = "restore the row as migrations/postgres/00002_fencing_floor_and_replays.sql creates it and move it " +
	"past the trail's ids (INSERT INTO leasestore_audit_era (id, id_offset) VALUES (1, 0); SELECT leasestore_audit_new_era())"

// errEraRowUnseen is the refusal of an audit read (op) whose statement
// found no row of leasestore_audit_era, from which it takes the trail's
// horizon: row-level security on it, or the row deleted.
func errEraRowUnseen(op protocol.Op) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
		"postgres: the audit trail cannot be read: the DSN's role sees no row of leasestore_audit_era "+
			"(row-level security on it, or the row deleted): run ALTER TABLE leasestore_audit_era DISABLE ROW LEVEL SECURITY, or %s",
		eraRowFix)
}

// errEraRowUnmoved is the refusal of fencing raise whose statement
// (raiseAuditIDsSQL) moved no row of leasestore_audit_era, through which
// it moves the audit ids: the session sees none (row-level security on
// it, or the row deleted), or a policy lets it update none. It moved
// neither the ids nor the tokens.
func errEraRowUnmoved() error {
	return backendkit.NewError(protocol.OpRaiseTokens, protocol.StatusUnavailable, nil,
		"postgres: fencing raise moved nothing: it moves the audit ids through leasestore_audit_era's row, which the "+
			"DSN's role cannot update (row-level security on it, or the row deleted): run ALTER TABLE "+
			"leasestore_audit_era DISABLE ROW LEVEL SECURITY, or %s; then raise again", eraRowFix)
}

// interpretError is the one place where driver and server errors become
// protocol errors, for op (empty while opening):
//
//   - a unique violation of (namespace, request_id): errRequestIDRace, which
//     the caller resolves into the replayed outcome;
//   - a serialization failure or deadlock: errSerialization (wrapping err),
//     which the caller runs again;
//   - LS001 (audit ids went back): errAuditWentBack, which the caller
//     repairs;
//   - LS002 (a batch's key busy): errKeyBusy, which the caller runs alone;
//   - a change that came back without its audit record (recordMissingSQL:
//     SQLSTATE 42704 naming recordMissingSetting; nothing was committed):
//     unavailable, naming the causes and their fixes;
//   - read_only_sql_transaction (a standby, or a read-only role):
//     unavailable, saying so;
//   - the pool closed (a call that began as Close closed it, or a pool
//     given to New that its owner closed): closed, nothing was sent;
//   - a passed deadline or a cancelled context, and the server's
//     deadlines: query_canceled by statement_timeout, lock_not_available
//     (lock_timeout): timeout, naming the setting;
//   - any other query_canceled ("canceling statement due to user
//     request"): a cancel request that was not the caller's (another
//     session's pg_cancel_backend, a DBA's; the one the pool sends when
//     the caller's context ended is interpretCallError's): no deadline
//     passed, so not timeout: unavailable (the server refused service),
//     saying the server cancelled the statement. The server's message
//     tells the two apart; on a server whose lc_messages is not English a
//     statement_timeout reads so too (the same retry rule);
//   - a missing table, sequence or schema: unavailable, naming
//     `leasectl migrate up`;
//   - a newer schema's serving guard (a CHECK constraint named
//     migrations.ServingGuardPrefix...): unavailable, naming the upgrade;
//   - the fencing sequence at its limit (2200H from nextval; 22003 from a
//     setval past its MAXVALUE: fencing raise, the repair): unavailable,
//     naming the ALTER SEQUENCE that fixes it (see sequenceError);
//   - a permission error (42501 "permission denied for ...") on a table,
//     the sequence, the schema or one of the store's functions:
//     unavailable matching [protocol.ErrForbidden] (see [forbidden]),
//     naming the GRANT that gives the privilege
//     (docs/postgres-settings.md lists them; see grantFor);
//   - a connection the server refused for its database (3D000: it does
//     not exist): unavailable, naming what to check;
//   - a connection the server refused for its role (28000, 28P01:
//     unknown, no password, wrong password, pg_hba.conf): unavailable
//     matching [protocol.ErrUnauthenticated], naming the DSN's role and
//     password and pg_hba.conf;
//   - insufficient resources, each named with its fix: a limit of
//     connections (53300: max_connections, a role's or database's
//     CONNECTION LIMIT), a full disk (53100), memory (53200; "out of
//     shared memory": a full lock table, max_locks_per_transaction), a
//     limit of the configuration (53400): unavailable;
//   - a refused, lost or terminated connection (class 08, 57P01-57P03),
//     the rest of class 53, and any other error: unavailable (the server's
//     error, which the text appends, names its SQLSTATE).
//
// The result is an *protocol.Error whose cause is err; its message does not
// repeat the cause, which the error's text appends. An err that is an
// *protocol.Error already (interpreted before, or the backend's own, such
// as closed) comes back as it is: interpreted again, it was wrapped as
// unavailable and matched two statuses.
func interpretError(op protocol.Op, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*protocol.Error); ok {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch code := pe.Code; {
		case code == "23505" && pe.ConstraintName == requestConstraint:
			return errRequestIDRace
		case code == "40001" || code == "40P01":
			return fmt.Errorf("%w: %w", errSerialization, err)
		case code == "LS001":
			return fmt.Errorf("%w: %w", errAuditWentBack, err)
		case code == "LS002":
			return errKeyBusy
		case code == "42704" && strings.Contains(pe.Message, recordMissingSetting):
			return backendkit.NewError(op, protocol.StatusUnavailable, nil,
				"postgres: the change's audit record could not be written, so nothing was changed: the DSN's role "+
					"sees no row of leasestore_audit_era (row-level security on it, or the row deleted), or a "+
					"trigger on leasestore_audit drops the record; Health names which: run ALTER TABLE "+
					"leasestore_audit_era DISABLE ROW LEVEL SECURITY, or %s, or drop the trigger", eraRowFix)
		case code == "25006":
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the connection is read-only (a standby, or default_transaction_read_only is on): "+
					"writes need the primary and a role that can write")
		case code == "57014" && strings.Contains(pe.Message, "statement timeout"):
			return backendkit.NewError(op, protocol.StatusTimeout, err,
				"postgres: the server cancelled the statement: it ran longer than the session's statement_timeout")
		case code == "55P03":
			return backendkit.NewError(op, protocol.StatusTimeout, err,
				"postgres: the server cancelled the statement: it waited for a lock longer than the session's lock_timeout")
		case code == "57014":
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server cancelled the statement at another session's request (pg_cancel_backend)")
		case code == "23514" && strings.HasPrefix(pe.ConstraintName, migrations.ServingGuardPrefix):
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the schema was migrated past what this release serves (its guard %s refuses this "+
					"release's writes; Health names the versions): upgrade leasestore", pe.ConstraintName)
		case (code == "2200H" || code == "22003") && strings.Contains(pe.Message, `"leasestore_fencing_seq"`):
			if strings.Contains(pe.Message, "minimum value") {
				return backendkit.NewError(op, protocol.StatusUnavailable, err,
					"postgres: leasestore_fencing_seq counts down and reached its MINVALUE, so no token can be drawn: "+
						"run ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 NO CYCLE (the next Open or Health "+
						"then moves it past the tokens issued)")
			}
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: leasestore_fencing_seq has no value left below its MAXVALUE, so no token can be drawn: "+
					"run ALTER SEQUENCE leasestore_fencing_seq NO MAXVALUE")
		case code == "42501" && strings.HasPrefix(pe.Message, "permission denied for "):
			// Not the append-only triggers' refusal, which shares the code.
			return forbidden(op, err, "postgres: %s", privilegeFix(pe.Message))
		case missingSchemaObject(pe):
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the leasestore schema is missing from the connection's search_path: "+
					"run `leasectl migrate up` (or call migrations.Up)")
		case code == "3D000":
			// invalid_catalog_name: the server answers it to a connection whose database does not exist.
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server refused the connection: the DSN's database does not exist: "+
					"check the database name in the DSN, or create the database (createdb, CREATE DATABASE)")
		case code == "28000" || code == "28P01":
			// invalid_authorization_specification, invalid_password: answered at connection.
			return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Unauthenticated(err),
				"postgres: the server refused the connection: check the DSN's role and password, "+
					"and that pg_hba.conf lets that role connect to that database from this host")
		case code == "53300":
			// too_many_connections: max_connections (less the reserved
			// slots) reached, or the role's or the database's CONNECTION
			// LIMIT; the server's message, which the text appends, says which.
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server refused the connection: a limit of connections is reached: raise the server's "+
					"max_connections or the role's or database's CONNECTION LIMIT (ALTER ROLE/DATABASE ... CONNECTION "+
					"LIMIT), or open fewer connections (a smaller pool_max_conns, a pooler in front)")
		case code == "53100":
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server's disk is full: free space on the volume holding its data directory or WAL")
		case code == "53200" && pe.Message == "out of shared memory":
			// A shared table is full, most often the lock table (the
			// server's hint, which the error's text leaves out, names the
			// setting): more memory settings would not help.
			msg := "postgres: the server ran out of shared memory, most often its lock table: raise " +
				"max_locks_per_transaction (max_pred_locks_per_transaction for serializable transactions) and restart it"
			if pe.Hint != "" {
				msg += " (the server's hint: " + pe.Hint + ")"
			}
			return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s", msg)
		case code == "53200":
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server is out of memory: lower its memory settings (work_mem, shared_buffers) or "+
					"its load, or give it more memory")
		case code == "53400":
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server reached a limit of its configuration, which its message names: raise that setting")
		case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", strings.HasPrefix(code, "53"):
			return backendkit.NewError(op, protocol.StatusUnavailable, err,
				"postgres: the server refused or dropped the connection")
		default:
			return backendkit.NewError(op, protocol.StatusUnavailable, err, "postgres: the server refused the statement")
		}
	}
	var ce *pgconn.ConnectError
	switch {
	case errors.Is(err, puddle.ErrClosedPool):
		// A call that began as Close closed the pool: nothing was sent.
		return backendkit.NewError(op, protocol.StatusClosed, err,
			"postgres: the pool was closed (by the Backend's Close, or, for a pool given to New, by its owner)")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), pgconn.Timeout(err):
		return backendkit.NewError(op, protocol.StatusTimeout, err, "postgres: the deadline passed")
	case errors.As(err, &ce) && isNetError(err):
		// Nothing answered at the DSN's address: refused, unreachable, or
		// a host name that does not resolve.
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"postgres: cannot connect: check the DSN's host and port, and that the server runs and listens "+
				"there (its listen_addresses and port)")
	case errors.As(err, &ce):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "postgres: cannot connect")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isNetError(err):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "postgres: the connection was lost")
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "postgres")
}

// interpretCallError is interpretError for the error of a statement sent
// with ctx, the caller's context. When ctx ended while the server ran the
// statement, the pool asked the server to cancel it (see Open) and the
// server answered query_canceled (57014, "canceling statement due to user
// request"): that is the caller's deadline (or its cancel), not the
// server's doing, so the answer is timeout saying so, its cause matching
// ctx's error (and [context.Cause]) as well as the server's answer. A
// query_canceled while ctx is live came from the server's side, and
// interpretError says the server cancelled the statement: timeout for a
// statement_timeout, unavailable for another session's
// pg_cancel_backend.
func interpretCallError(ctx context.Context, op protocol.Op, err error) error {
	var pe *pgconn.PgError
	if err == nil || ctx.Err() == nil || !errors.As(err, &pe) || pe.Code != "57014" {
		return interpretError(op, err)
	}
	why := "the deadline passed"
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "the caller cancelled its context"
	}
	cause := fmt.Errorf("%w: %w", ctx.Err(), err)
	if c := context.Cause(ctx); !errors.Is(cause, c) {
		cause = fmt.Errorf("%w: %w", c, cause)
	}
	return backendkit.NewError(op, protocol.StatusTimeout, cause,
		"postgres: %s while the server ran the statement, so the pool had the server cancel it", why)
}

// interpret is interpretCallError for the operations of b: a statement
// that met a missing table or function of the store is answered, when the
// schema's version is the cause (migrated down, or past what this release
// serves, under the running backend), with checkSchema's error naming both
// versions, as Open and Health answer, rather than a missing schema.
func (b *Backend) interpret(ctx context.Context, op protocol.Op, err error) error {
	ie := interpretCallError(ctx, op, err)
	if !isMissingSchema(err) {
		return ie
	}
	var pe *protocol.Error
	if serr := b.checkSchema(ctx); errors.As(serr, &pe) {
		c := *pe
		c.Op = op
		return &c
	}
	return ie
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// inconsistent reports a statement result that the classification cannot
// explain; it would be a bug in the statements.
func inconsistent(op protocol.Op, format string, args ...any) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil, "postgres: %s: unexpected outcome: %s",
		op, fmt.Sprintf(format, args...))
}

// missingSchemaObject reports whether pe says a table, schema or leasestore
// function the statement names does not exist: the schema is missing, or
// older than the statement (rolled back beneath a running release).
func missingSchemaObject(pe *pgconn.PgError) bool {
	return pe.Code == "42P01" || pe.Code == "3F000" || (pe.Code == "42883" && strings.Contains(pe.Message, "leasestore"))
}

// isMissingSchema reports whether err comes from a statement that met
// missingSchemaObject.
func isMissingSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && missingSchemaObject(pe)
}

// unusableSchema is the error of op for a role that may not use schema
// name, which the connection's search_path names (see [pgschema.Unusable],
// which migrate up gives too).
func unusableSchema(op protocol.Op, name string) error {
	return forbidden(op, nil, "postgres: %s", pgschema.Unusable(name))
}

// forbidden is the error of op refused for the DSN's role's privileges
// (a 42501 permission error, cause; a privilege Health finds missing; a
// schema the role may not use): unavailable, matching
// [protocol.ErrForbidden] (a retry is refused again until a GRANT, so no
// caller retries it as an outage; leasectl exits 7), the message naming
// the GRANT.
func forbidden(op protocol.Op, cause error, format string, args ...any) *protocol.Error {
	return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Forbidden(cause), format, args...)
}

// privilegeFix names the GRANT that answers a permission error whose
// message is msg ("permission denied for sequence leasestore_fencing_seq").
func privilegeFix(msg string) string {
	kind, name, _ := strings.Cut(strings.TrimPrefix(msg, "permission denied for "), " ")
	grant := grantFor(kind, name)
	if grant == "" {
		return "the DSN's role lacks a privilege: grant it those docs/postgres-settings.md#privileges lists"
	}
	return fmt.Sprintf("the DSN's role lacks a privilege: run GRANT %s TO it "+
		"(docs/postgres-settings.md#privileges lists what each command needs)", grant)
}

// grantFor is what a GRANT of the privileges the backend may need on the
// object name of kind (sequence, table, schema, or function: one of the
// store's functions that a role calls, which go together in two sets,
// servingFunctions and the prune's claim functions of migration 8) names,
// after GRANT: every privilege any command needs
// (docs/postgres-settings.md#privileges), so that one GRANT answers them
// all; "" for another kind or function, or no name. A schema's name is
// quoted, so that the statement runs as given whatever the name (upper
// case, a dash, a space, a double quote); the other objects are the
// store's own, named in lower case.
func grantFor(kind, name string) string {
	switch {
	case name == "":
	case kind == "sequence":
		return "USAGE, UPDATE ON SEQUENCE " + name
	case kind == "table":
		return "SELECT, INSERT, UPDATE, DELETE ON TABLE " + name
	case kind == "schema":
		return pgschema.UsageGrant(name)
	case kind == "function" && (name == "leasestore_audit_prune_claim" || name == "leasestore_audit_prune_unclaim"):
		return pruneClaimGrant
	case kind == "function":
		for _, f := range servingFunctions {
			if strings.HasPrefix(f, name+"(") {
				return servingFunctionsGrant
			}
		}
	}
	return ""
}

// pruneClaimGrant is what follows GRANT to let a role that may prune
// execute the functions through which a prune claims and frees its
// request id (migration 8 grants it to the roles that hold DELETE on the
// trail when it runs).
const pruneClaimGrant = "EXECUTE ON FUNCTION leasestore_audit_prune_claim(text, text, text, timestamptz, timestamptz), " +
	"leasestore_audit_prune_unclaim(text, text)"

// servingFunctions are the store's functions that a role that serves or
// reads calls, by signature: the outcomes that every change statement
// names (leasestore_outcome, leasestore_outcome_fresh), the refusal of a
// record whose id went back (leasestore_audit_went_back, named by every
// change statement too), the new era of ids that follows it
// (leasestore_audit_new_era, called when the ids went back) and the
// horizon of prunes and their last batch that audit reads from a cursor and
// follower's reads name (leasestore_audit_pruned_mark; the releases before
// schema 11 name leasestore_audit_pruned_through, kept in the grant for a
// role that serves both during a rolling deploy). PostgreSQL lets PUBLIC execute a new
// function, unless the schema owner's default privileges keep it private:
// then a role needs them all, and the permission error on any one names
// servingFunctionsGrant, which gives them all at once. The server checks
// EXECUTE on every function a statement names when the statement starts,
// whether it calls it or not. The store's trigger functions are not
// among them (a trigger runs its function whatever the writer may
// execute), nor is the coalescer's temporary function (each connection
// makes and owns its own).
var servingFunctions = []string{
	"leasestore_outcome(text, text, text)",
	"leasestore_outcome_fresh(text, text, text)",
	"leasestore_audit_went_back()",
	"leasestore_audit_new_era()",
	"leasestore_audit_pruned_through(text)",
	"leasestore_audit_pruned_mark(text)",
}

// servingFunctionsGrant is what follows GRANT to let a role execute
// servingFunctions.
var servingFunctionsGrant = "EXECUTE ON FUNCTION " + strings.Join(servingFunctions, ", ")
