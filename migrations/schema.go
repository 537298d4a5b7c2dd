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
