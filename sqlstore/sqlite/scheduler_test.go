package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// The fenced resource of the scheduler suite: a table in the store's file
// that accepts a write for a target only when its token is at least the
// last accepted one, and logs the accepted writes in order.
const (
	fencedSchema = `CREATE TABLE fenced (target TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE fenced_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, token INTEGER NOT NULL, writer TEXT NOT NULL)`
	fencedWrite = `INSERT INTO fenced (target, token) VALUES (?1, ?2)
ON CONFLICT (target) DO UPDATE SET token = excluded.token WHERE excluded.token >= fenced.token`
	fencedLog      = `INSERT INTO fenced_log (target, token, writer) VALUES (?1, ?2, ?3)`
	fencedAccepted = `SELECT target, token, writer FROM fenced_log ORDER BY seq`
)

type fencedTable struct{ db *sql.DB }

func (f fencedTable) Write(ctx context.Context, target string, token int64, writer string) (bool, error) {
	tx, err := f.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (OpenDB's _txlock)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, fencedWrite, target, token)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, fencedLog, target, token, writer); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

func (f fencedTable) Accepted(ctx context.Context) ([]schedulertest.Write, error) {
	rows, err := f.db.QueryContext(ctx, fencedAccepted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return schedulertest.ScanWrites(rows)
}

// TestScheduler runs the scheduler suite on a fresh file per case; every
// worker opens the file itself, as a process of its own would.
func TestScheduler(t *testing.T) {
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
		path := migratedFile(t)
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.ExecContext(ctxT(t), fencedSchema); err != nil {
			t.Fatal(err)
		}
		return schedulertest.Harness{
			NewStore: func(t *testing.T) protocol.Store {
				return schedulertest.OpenStore(t, func() (*sqlite.Backend, error) {
					return sqlite.Open(context.Background(), path, nil)
				})
			},
			Resource: fencedTable{db},
		}
	})
}
