package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/leasestore/leasestore/internal/pgschema"
)

// EnsureSchema creates, on PostgreSQL, the schema the connection's
// search_path names when none of its schemas exists yet: a schema given to
// leasestore in the DSN (options=-csearch_path=NAME) is the operator's own,
// and migrating is what sets the store up. It returns the schema it
// created, "" when one existed. A user without the CREATE privilege on the
// database gets an error naming the statement a DBA should run; a user
// that may not use the schema, which exists (current_schema() passes over
// it as over a missing one), an error naming the GRANT of USAGE on it, as
// the PostgreSQL backend's Open and Health name it. [Up] calls
// it; call it yourself only to learn whether a schema was created.
func EnsureSchema(ctx context.Context, db *sql.DB) (string, error) {
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		return "", fmt.Errorf("migrations: read the current schema: %w", err)
	}
	if current.Valid {
		return "", nil
	}
	var path string
	if err := db.QueryRowContext(ctx, "SHOW search_path").Scan(&path); err != nil {
		return "", fmt.Errorf("migrations: read search_path: %w", err)
	}
	name := firstSchema(path)
	if name == "" {
		return "", fmt.Errorf("migrations: the search_path (%s) names no schema to migrate into: "+
			"add one to the DSN, as in ?options=-csearch_path%%3Dleasestore", path)
	}
	// current_schema() passes over a schema the role may not use as over
	// a missing one; creating it would do nothing, so the fix is a GRANT.
	var unusable bool
	if err := db.QueryRowContext(ctx, unusableSchemaSQL, name).Scan(&unusable); err != nil {
		return "", fmt.Errorf("migrations: read whether schema %q of the search_path exists: %w", name, err)
	}
	if unusable {
		return "", &unusableSchemaError{msg: fmt.Sprintf("migrations: %s, then migrate up again", pgschema.Unusable(name))}
	}
	stmt := "CREATE SCHEMA IF NOT EXISTS " + quoteIdent(name)
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		// The fix names this role as the schema's owner, so that it may
		// migrate it (and migrate it down) afterwards.
		var user string
		if db.QueryRowContext(ctx, "SELECT current_user").Scan(&user) == nil {
			stmt += " AUTHORIZATION " + quoteIdent(user)
		}
		return "", fmt.Errorf("migrations: schema %q of the search_path does not exist and this user cannot create it: "+
			"have the database owner run %s, then migrate up again: %w", name, stmt, err)
	}
	return name, nil
}

// ErrSchemaUnusable is matched (errors.Is) by the error of [EnsureSchema]
// (and so [Up]) when the session's role may not use the schema its
// search_path names (no USAGE): a refusal of the role's privileges, which
// a GRANT fixes and a retry does not (leasectl exits 7, forbidden). The
// error's text names the GRANT.
var ErrSchemaUnusable = errors.New("migrations: the role may not use the schema")

// unusableSchemaError is the error of EnsureSchema for a schema the role
// may not use: msg names the GRANT; it matches ErrSchemaUnusable.
type unusableSchemaError struct{ msg string }

func (e *unusableSchemaError) Error() string        { return e.msg }
func (e *unusableSchemaError) Is(target error) bool { return target == ErrSchemaUnusable }

// unusableSchemaSQL reads whether schema $1 exists and the session's role
// may not use it.
const unusableSchemaSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace n
               WHERE n.nspname = $1 AND NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE'))`

// firstSchema returns the first schema named in a search_path setting,
// skipping "$user", with quotes removed and unquoted names folded to lower
// case as PostgreSQL reads them; "" when there is none.
func firstSchema(path string) string {
	for rest := strings.TrimSpace(path); rest != ""; {
		var name string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest); i++ {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			name, rest = b.String(), rest[min(i+1, len(rest)):]
			_, rest, _ = strings.Cut(rest, ",")
		} else {
			var elem string
			elem, rest, _ = strings.Cut(rest, ",")
			name = strings.ToLower(strings.TrimSpace(elem))
		}
		rest = strings.TrimSpace(rest)
		if name != "" && name != "$user" {
			return name
		}
	}
	return ""
}

// quoteIdent quotes name as a PostgreSQL identifier. (This package imports
// no driver, so not pgx.Identifier.)
func quoteIdent(name string) string { return pgschema.QuoteIdent(name) }

// ErrStoreInAnotherSchema is matched (errors.Is) by the error of [Up] on
// PostgreSQL when a schema of the connection's search_path other than its
// current schema (the first one that exists, which Up migrates) already
// holds a leasestore store (its [VersionTable]). A schema created before
// the store's in the search_path (the default "$user", public, once a DBA
// creates the role's own schema) would otherwise get a second, empty
// store, and the unqualified statements of a running backend would move
// to it: its fencing sequence starts again at 1, so tokens are issued
// again and held leases acquired again. leasectl exits 7, as for a
// refusal a retry does not fix. The error's text names both schemas and
// the fix: put the store's schema first in the DSN's search_path, or drop
// the new schema.
var ErrStoreInAnotherSchema = errors.New("migrations: another schema of the search_path holds the store")

// storeElsewhereError is Up's refusal to migrate a schema while another
// schema of the search_path holds a store; it matches
// ErrStoreInAnotherSchema.
type storeElsewhereError struct{ msg string }

func (e *storeElsewhereError) Error() string        { return e.msg }
func (e *storeElsewhereError) Is(target error) bool { return target == ErrStoreInAnotherSchema }

// storeElsewhereSQL reads the connection's current schema and the other
// schemas of its search_path, in order, whose version table $1 exists
// (current_schemas lists those that exist and the role may use).
const storeElsewhereSQL = `
SELECT coalesce(current_schema(), ''),
       coalesce((SELECT string_agg(quote_ident(s.name), ', ' ORDER BY s.i)
                 FROM unnest(current_schemas(false)) WITH ORDINALITY AS s(name, i)
                 WHERE s.name IS DISTINCT FROM current_schema()
                   AND EXISTS (SELECT FROM pg_catalog.pg_tables t
                               WHERE t.schemaname = s.name AND t.tablename = $1)), '')`

// refuseStoreElsewhere is Up's check, on PostgreSQL, that no schema of the
// search_path other than the current one holds a store (see
// [ErrStoreInAnotherSchema]).
func refuseStoreElsewhere(ctx context.Context, db *sql.DB) error {
	var current, others string
	if err := db.QueryRowContext(ctx, storeElsewhereSQL, VersionTable).Scan(&current, &others); err != nil {
		return fmt.Errorf("migrations: read the schemas of the search_path that hold a store: %w", err)
	}
	if others == "" {
		return nil
	}
	return &storeElsewhereError{msg: fmt.Sprintf("migrations: schema %s of the search_path already holds a leasestore "+
		"store (its %s table), and migrate up would migrate schema %s, which comes before it: a second store there "+
		"would take over every unqualified statement of the running services (its fencing sequence starts again "+
		"at 1, so tokens are issued again and held leases are acquired again). Put the store's schema first in the "+
		"DSN's search_path (options=-csearch_path%%3D...), or drop schema %s if it was created by mistake; "+
		"then migrate up again", others, VersionTable, quoteIdent(current), quoteIdent(current))}
}
