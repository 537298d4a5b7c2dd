package sqlite_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestNothingWrittenAfterCloseByAHealthInFlight: Close says "nothing is
// written after it returned nil", but Health's repair of a fencing counter
// lowered behind the file's tokens (repairCounter) writes through the
// *sql.DB directly, outside the writes Close waits for: a Health that
// began before Close (here waiting for a connection of the caller's
// *sql.DB) writes the file after Close returned nil.
func TestNothingWrittenAfterCloseByAHealthInFlight(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(sqlite.MinOpenConns)
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := protocol.New(b, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	// Another handle lowers the counter behind the token issued, its
	// trigger dropped and made again as the migration made it.
	raw := rawDB(t, path)
	var trigger string
	if err := raw.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'leasestore_fencing_no_decrease'`).Scan(&trigger); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER leasestore_fencing_no_decrease`, `UPDATE leasestore_fencing SET last_token = 0`, trigger} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// Health begins, and waits for a connection of the caller's *sql.DB.
	var held []*sql.Conn
	for range sqlite.MinOpenConns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	health := make(chan error, 1)
	go func() { health <- b.Health(ctx) }()
	for db.Stats().WaitCount == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("Health never waited for a connection")
		case <-time.After(time.Millisecond):
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range held {
		_ = c.Close()
	}
	herr := <-health
	var counter int64
	if err := raw.QueryRowContext(ctx, `SELECT last_token FROM leasestore_fencing`).Scan(&counter); err != nil {
		t.Fatal(err)
	}
	if counter != 0 {
		t.Fatalf("the fencing counter moved from 0 to %d after Close returned nil (by a Health that began before it, "+
			"which answered %v); want nothing written after Close returned nil", counter, herr)
	}
}
