package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The fenced resource of the scheduler suite: a table in the store's
// schema that accepts a write for a target only when its token is at least
// the last accepted one, and logs the accepted writes. The row lock taken
// by the upsert orders the writes of one target, so the log's sequence
// follows their acceptance.
const (
	fencedSchema = `CREATE TABLE fenced (target text PRIMARY KEY, token bigint NOT NULL);
CREATE TABLE fenced_log (seq bigserial PRIMARY KEY, target text NOT NULL, token bigint NOT NULL, writer text NOT NULL)`
	fencedWrite = `WITH accepted AS (
  INSERT INTO fenced AS f (target, token) VALUES ($1, $2)
  ON CONFLICT (target) DO UPDATE SET token = excluded.token WHERE excluded.token >= f.token
  RETURNING target, token)
INSERT INTO fenced_log (target, token, writer) SELECT target, token, $3 FROM accepted`
	fencedAccepted = `SELECT target, token, writer FROM fenced_log ORDER BY seq`
)

type fencedTable struct{ pool *pgxpool.Pool }

func (f fencedTable) Write(ctx context.Context, target string, token int64, writer string) (bool, error) {
	tag, err := f.pool.Exec(ctx, fencedWrite, target, token, writer)
	return tag.RowsAffected() == 1, err
}

func (f fencedTable) Accepted(ctx context.Context) ([]schedulertest.Write, error) {
	rows, err := f.pool.Query(ctx, fencedAccepted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return schedulertest.ScanWrites(rows)
}

// TestScheduler runs the scheduler suite on a fresh schema per case; every
// worker opens a pool of its own, as a process of its own would. It runs
// beside the package's other parallel tests: the suite mostly waits for
// its 2s TTLs, and run alone it left a core idle (SQLite's suite, which
// needs more CPU, keeps to itself in its package).
func TestScheduler(t *testing.T) {
	t.Parallel()
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
		dsn := pgtest.MigratedDSN(t)
		pool := rawPool(t, dsn)
		mustExec(t, pool, fencedSchema)
		return schedulertest.Harness{
			NewStore: func(t *testing.T) protocol.Store {
				return schedulertest.OpenStore(t, func() (*postgres.Backend, error) {
					return postgres.Open(context.Background(), dsn, &postgres.Config{MaxConns: 4})
				})
			},
			Resource: fencedTable{pool},
		}
	})
}
