// Package pgschema says what the PostgreSQL backend (sqlstore/postgres,
// at open and health) and the migrations (migrations.Up, `leasectl
// migrate up`) tell a role that may not use a schema of its connection's
// search_path: one sentence, naming the same GRANT, so that every command
// gives the same fix. It imports no database driver (migrations imports
// none).
package pgschema

import (
	"fmt"
	"strings"
)

// QuoteIdent quotes name as a PostgreSQL identifier, as pgx's
// Identifier.Sanitize does: double quotes doubled, NUL bytes dropped.
func QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(name, "\x00", ""), `"`, `""`) + `"`
}

// UsageGrant is what follows GRANT to let a role use schema name, the
// name quoted so that the statement runs as given whatever the name
// (upper case, a dash, a space, a double quote).
func UsageGrant(name string) string {
	return "USAGE ON SCHEMA " + QuoteIdent(name)
}

// Unusable is the fix for a role that may not use schema name, which its
// connection's search_path names: the server passes over such a schema
// (current_schema() skips it), so the role sees none of the store's
// objects in it, and creating the schema would do nothing.
func Unusable(name string) string {
	return fmt.Sprintf("the DSN's role may not use schema %s, which the connection's search_path names, so it sees "+
		"none of the store's objects: run GRANT %s TO it (docs/postgres-settings.md#privileges lists what "+
		"each command needs)", name, UsageGrant(name))
}
