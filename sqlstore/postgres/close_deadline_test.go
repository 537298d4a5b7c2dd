package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestCloseAnswersByItsDeadline: Close of a pool the Backend owns waits,
// in pgxpool's Close, until every connection came back, and one is held
// here by a read waiting for a lock another session holds (a DBA's LOCK
// TABLE, a migration) for longer than Close's context allows: Close
// returned when the read's own deadline ended it, whatever its context
// said (protocol.Runtime.Close gives a backend's Close a grace of 5s, and
// then waits as long as it takes). Close must answer by its deadline with
// a timeout error that matches the context's and says what it left; the
// Backend stays closed (later calls answer closed) and closes its pool in
// the background once the read ends (a second Close waits for that and
// answers nil, and the server then shows none of its connections).
func TestCloseAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b, err := postgres.Open(ctxT(t), dsn, &postgres.Config{ApplicationName: app})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	locker := rawConn(t, dsn)
	tx, err := locker.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctxT(t), "LOCK TABLE leasestore_leases IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	const readFor = 4 * time.Second
	read := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), readFor)
		defer cancel()
		_, err := b.Get(rctx, protocol.GetRequest{Key: key("k"), RequestID: "g"})
		read <- err
	}()
	time.Sleep(200 * time.Millisecond) // the read waits for the lock

	cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	cerr := b.Close(cctx)
	took := time.Since(start)
	if took > time.Second {
		t.Fatalf("Close with a 300ms context, while a read (deadline %v) waits for a lock another session holds: "+
			"returned after %v (%v); want by its deadline", readFor, took.Round(time.Millisecond), cerr)
	}
	if !errors.Is(cerr, protocol.ErrTimeout) || !errors.Is(cerr, context.DeadlineExceeded) || !strings.Contains(cerr.Error(), "connection") {
		t.Errorf("Close cut off by its deadline: %v; want timeout matching context.DeadlineExceeded that names the connections it left", cerr)
	}
	t.Logf("Close cut off: %v", cerr)
	_, err = b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g2"})
	wantErrStatus(t, "get after a Close cut off by its deadline", err, protocol.StatusClosed)

	// The lock goes, the read ends, and the pool is closed in the
	// background: a second Close waits for it.
	_ = tx.Rollback(ctxT(t))
	if err := <-read; err != nil {
		t.Logf("the read in flight at Close: %v", err)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatalf("second Close, once the read ended: %v; want nil", err)
	}
	observer := rawConn(t, pgtest.ServerDSN(t))
	deadline := time.Now().Add(10 * time.Second)
	for n := 1; n > 0; time.Sleep(20 * time.Millisecond) {
		if n = count(t, observer, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app); n > 0 && time.Now().After(deadline) {
			t.Fatalf("%d connections named %q remain after Close finished", n, app)
		}
	}
}
