package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/replaycompat"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// v1Client sends the first release's statements (v1_statements_test.go), as
// a binary of that release would.
type v1Client struct {
	pool  *pgxpool.Pool
	owner string
	n     atomic.Int64
}

// cycle acquires name and, when that took effect, releases it. It reports
// the token acquired (0 for a conflict) and any error a statement returned.
// Like a caller of that release, it retries a statement that answered
// unavailable because of a deadlock or a serialization failure (while a
// migration takes its locks), with the same request id.
func (c *v1Client) cycle(ctx context.Context, name string) (int64, error) {
	for {
		tok, err := c.cycleOnce(ctx, name)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
			c.n.Add(-1) // the same request ids
			continue
		}
		return tok, err
	}
}

func (c *v1Client) cycleOnce(ctx context.Context, name string) (int64, error) {
	i := c.n.Add(1)
	return c.cycleWith(ctx, name, fmt.Sprintf("%s-a%d", c.owner, i), fmt.Sprintf("%s-r%d", c.owner, i), "hash")
}

// cycleWith is one acquire-release cycle of the first release's statements
// with the given request ids and fingerprint.
func (c *v1Client) cycleWith(ctx context.Context, name, acquireRID, releaseRID, hash string) (int64, error) {
	var (
		now           time.Time
		owner         pgtype.Text
		token, fresh  pgtype.Int8
		acq, ren, exp pgtype.Timestamptz
		version       pgtype.Int4
		outcome       []byte
		ttl           = pgtype.Interval{Microseconds: time.Minute.Microseconds(), Valid: true}
	)
	const leaseVersion, recordVersion = 1, 1
	err := c.pool.QueryRow(ctx, v1AcquireSQL, "ns", name, c.owner, ttl, acquireRID, hash, nil, leaseVersion, recordVersion).
		Scan(&now, &owner, &token, &acq, &ren, &exp, &version, &fresh, &outcome)
	if err != nil || !fresh.Valid || token.Int64 != fresh.Int64 {
		return 0, err
	}
	err = c.pool.QueryRow(ctx, v1ReleaseSQL, "ns", name, c.owner, token.Int64, releaseRID, hash, nil, leaseVersion, recordVersion).
		Scan(&now, &owner, &token, &acq, &ren, &exp, &version, &fresh, &outcome)
	if err != nil {
		return 0, err
	}
	if !token.Valid {
		return 0, fmt.Errorf("v1 release of %s: no effect", name)
	}
	return token.Int64, nil
}

// TestRollingDeployFromVersion1 migrates a version 1 store that holds data
// to the current schema while a version 1 binary keeps working on it, then
// runs both releases side by side on the same keys, then rolls the schema
// back to version 1 with the data: the version 1 binary never fails, the
// tokens of every key increase in the order of its records, and the
// current release reads the whole trail.
func TestRollingDeployFromVersion1(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	db := sqlDB(t, dsn)
	ctx := ctxT(t)
	p, err := migrations.NewProvider(ctx, migrations.Postgres, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	old := &v1Client{pool: rawPool(t, dsn), owner: "v1"}
	keys := []string{"k0", "k1", "k2", "k3"}
	for i := range 40 {
		if _, err := old.cycle(ctx, keys[i%len(keys)]); err != nil {
			t.Fatalf("v1 before the migration: %v", err)
		}
	}

	// The version 1 binary keeps cycling through everything that follows.
	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		v1Err   atomic.Value
		v1Count atomic.Int64
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, cancel := context.WithTimeout(context.Background(), opTimeout)
			tok, err := old.cycle(c, keys[rand.N(len(keys))])
			cancel()
			if err != nil {
				v1Err.Store(err)
				return
			}
			if tok > 0 {
				v1Count.Add(1)
			}
		}
	})
	time.Sleep(100 * time.Millisecond)
	if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
		t.Fatalf("migrate up under a running version 1 binary: %v", err)
	}
	b := openBackend(t, dsn, nil)
	for i := range 200 {
		name := keys[i%len(keys)]
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "v2", TTL: time.Minute, RequestID: fmt.Sprintf("v2-a%d", i)})
		if err != nil {
			t.Fatalf("current release beside version 1: %v", err)
		}
		if res.Status == protocol.StatusAcquired {
			rel, err := b.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: "v2", Token: res.Lease.Token, RequestID: fmt.Sprintf("v2-r%d", i)})
			wantStatus(t, "release", rel, err, protocol.StatusReleased)
		}
	}
	// A key the current release released is free for version 1 at once
	// (the tombstone reads to it as an expired lease).
	cycle(t, b, "handover", "v2", "handover", false)
	if tok, err := old.cycle(ctx, "handover"); err != nil || tok == 0 {
		t.Fatalf("version 1 acquiring a key the current release released: token %d, %v; want it acquired", tok, err)
	}
	trail := readAllRecords(t, b, "ns")

	// Roll the schema back to version 1, data and all.
	if _, err := migrations.Down(ctx, migrations.Postgres, db); err != nil {
		t.Fatalf("migrate down to version 1 with data: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err, _ := v1Err.Load().(error); err != nil {
		t.Fatalf("the version 1 binary failed: %v", err)
	}
	if v1Count.Load() == 0 {
		t.Fatal("the version 1 binary acquired nothing while the schema moved")
	}
	last := map[string]int64{}
	v1Seen := 0
	for _, r := range trail {
		if r.Op != protocol.OpAcquire {
			continue
		}
		if r.Token <= last[r.Key] {
			t.Fatalf("key %s: token %d recorded after %d", r.Key, r.Token, last[r.Key])
		}
		last[r.Key] = r.Token
		if r.Owner == "v1" {
			v1Seen++
		}
	}
	if v1Seen < 40 {
		t.Fatalf("the current release reads %d of the version 1 binary's acquires, want them all", v1Seen)
	}
	if _, err := postgres.Open(ctx, dsn, nil); err == nil {
		t.Fatal("the current release opened a version 1 schema")
	}
	t.Logf("version 1 completed %d cycles while the schema went up and down", v1Count.Load())
}

// readAllRecords pages through the trail of ns with plain reads.
func readAllRecords(t *testing.T, r audit.Reader, ns string) []audit.Record {
	t.Helper()
	var (
		recs   []audit.Record
		cursor string
	)
	for {
		p, err := r.ReadAudit(ctxT(t), audit.Query{Namespace: ns, Cursor: cursor, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, p.Records...)
		if p.NextCursor == "" {
			return recs
		}
		cursor = p.NextCursor
	}
}

// TestReplayOfRecordWithoutLockDelay: a record written before schema 5
// replays with lock-delay 0 (replaycompat); migrating down to 4 drops the
// records' lock-delay and restores version 4's leasestore_outcome, and up
// again brings the column back NULL.
func TestReplayOfRecordWithoutLockDelay(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ctx := ctxT(t)
	open := func() protocol.Backend {
		b, err := postgres.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	replaycompat.Check(ctx, t, "ns", open, func() {
		db := sqlDB(t, dsn)
		for v := migrations.LatestVersion; v > 4; v-- {
			if _, err := migrations.Down(ctx, migrations.Postgres, db); err != nil {
				t.Fatalf("migrate down from %d to 4 with records: %v", v, err)
			}
		}
		if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
			t.Fatalf("migrate up again: %v", err)
		}
	})
}
