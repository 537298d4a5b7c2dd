package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

// What the database enforces. The triggers the migrations create keep the
// audit trail append-only (leasestore_audit_no_update, _no_delete,
// _no_replace), mark what a prune removed (leasestore_audit_pruned_through,
// which a follower behind the prune is told by) and keep the fencing
// counter growing (leasestore_fencing_no_*). Another handle on the file
// (an operator's sqlite3 shell, a script) can drop or rewrite any of them,
// or commit a row of the prune window (leasestore_audit_prune), which
// lets any DELETE of the records before its cut-off through. Open, New
// and Health refuse such a file, naming what is wrong and the fix
// (storeRefusal); a prune refuses to remove records meanwhile, batch by
// batch, in the transaction that would remove them (where no other
// connection can change the schema: DDL takes the write lock too).
// `leasectl migrate up` cannot repair it: the schema's version is
// unchanged, so no migration runs again.

// queryer is a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// storeRefusal reads (qStoreGuards, through q) the file's triggers and
// prune window, and returns the refusal (op) of a file whose triggers are
// not those of [migrations.SQLiteTriggers], text for text at this
// release's schema version and by name at a newer one (whose migrations
// may rewrite a trigger, not drop one while this release may serve it),
// that has a trigger on the store's tables that they did not make (at a
// newer version, one not named leasestore_), or that holds a committed
// prune window (a prune's transaction calls it
// before it opens its own); a schema older
// than this release's is refused as such. nil when all is in place; err
// when it could not read them.
func (b *Backend) storeRefusal(ctx context.Context, q queryer, op protocol.Op) (*protocol.Error, error) {
	want, err := migrations.SQLiteTriggers()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, qStoreGuards)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		version   int64
		pruneFrom sql.NullInt64
		held      = map[string]string{}
		tables    = map[string]string{} // trigger name → its table
	)
	for rows.Next() {
		var name, text, table sql.NullString
		if err := rows.Scan(&version, &pruneFrom, &name, &text, &table); err != nil {
			return nil, err
		}
		if name.Valid {
			held[name.String], tables[name.String] = text.String, table.String
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if version < migrations.LatestVersion {
		// An older schema lacks triggers by design: it is refused as such,
		// naming both versions (a prune's transaction meets it here).
		e := sqlstore.SchemaVersionError(version, migrations.LatestVersion, fmt.Sprintf("sqlite database %q", b.file))
		e.Op = op
		return e, nil
	}
	var missing, altered []migrations.Trigger
	for _, t := range want {
		text, ok := held[t.Name]
		switch {
		case !ok:
			missing = append(missing, t)
		case version == migrations.LatestVersion && text != t.SQL:
			altered = append(altered, t)
		}
	}
	if len(missing) > 0 || len(altered) > 0 {
		return triggersError(op, b.file, missing, altered), nil
	}
	// A trigger of someone else's on the store's tables can change or
	// drop its writes (RAISE(IGNORE) in a BEFORE INSERT on the trail
	// drops a record, whose change then fails: recordID). A newer schema
	// may make triggers of its own, every one named leasestore_ as all
	// its objects are: on one, an unknown trigger so named is taken for
	// its own, as the PostgreSQL backend takes it; any other is refused.
	// SQLite keeps the table's name as the trigger's statement spelt it,
	// and names are case-insensitive: ON LEASESTORE_LEASES is on the
	// store's table too.
	var foreign []string
	for name, table := range tables {
		if !strings.HasPrefix(strings.ToLower(table), "leasestore_") || slices.ContainsFunc(want, func(t migrations.Trigger) bool { return t.Name == name }) {
			continue
		}
		if version > migrations.LatestVersion && strings.HasPrefix(strings.ToLower(name), "leasestore_") {
			continue
		}
		foreign = append(foreign, name+" on "+table)
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		return foreignTriggersError(op, b.file, foreign), nil
	}
	if pruneFrom.Valid {
		return pruneWindowError(op, b.file, pruneFrom.Int64), nil
	}
	return nil, nil
}
