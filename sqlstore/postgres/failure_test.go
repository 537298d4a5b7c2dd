package postgres_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// lockRow starts a transaction on its own connection that locks the lease
// row of name, and returns it; the test rolls it back (or the cleanup does).
func lockRow(t *testing.T, dsn, name string) pgx.Tx {
	t.Helper()
	c := rawConn(t, dsn)
	tx, err := c.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if n := count(t, tx, "SELECT count(*) FROM (SELECT FROM leasestore_leases WHERE namespace = 'ns' AND name = $1 FOR UPDATE) AS l", name); n != 1 {
		t.Fatalf("locked %d rows, want 1", n)
	}
	return tx
}

// blockedPID waits until a connection named app waits for a lock, and
// returns its server process id. Waiting for that state is the point of
// the poll: the operation under test has been sent and is blocked.
func blockedPID(t *testing.T, app string) int {
	t.Helper()
	observer := rawConn(t, pgtest.ServerDSN(t))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pid int
		err := observer.QueryRow(ctxT(t), `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection named %q is waiting for a lock", app)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type outcomeOf struct {
	res protocol.Result
	err error
}

// TestServerKillsTheConnectionMidOperation blocks a renew behind a row lock,
// terminates its server process, and checks that the renew reports
// unavailable, and that a retry with the same request id tells the truth:
// the killed statement took no effect, so the retry renews.
func TestServerKillsTheConnectionMidOperation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b := openBackend(t, dsn, &postgres.Config{ApplicationName: app, MaxConns: 2})
	acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	req := protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"}

	tx := lockRow(t, dsn, "k")
	done := make(chan outcomeOf, 1)
	go func() {
		res, err := b.Renew(ctxT(t), req)
		done <- outcomeOf{res, err}
	}()
	pid := blockedPID(t, app)
	mustExec(t, rawConn(t, pgtest.ServerDSN(t)), "SELECT pg_terminate_backend($1)", pid)
	got := <-done
	wantErrStatus(t, "renew on a killed connection", got.err, protocol.StatusUnavailable)
	var pe *pgconn.PgError
	if errors.As(got.err, &pe) && pe.Code != "57P01" {
		t.Fatalf("server error %s, want 57P01 (admin shutdown)", pe.Code)
	}
	t.Logf("killed: %v", got.err)
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	res, err := b.Renew(ctxT(t), req)
	wantStatus(t, "retry", res, err, protocol.StatusRenewed)
	if res.Replayed {
		t.Fatal("the retry is a replay, but the killed statement cannot have taken effect")
	}
	res, err = b.Renew(ctxT(t), req)
	wantStatus(t, "second retry", res, err, protocol.StatusRenewed)
	if !res.Replayed {
		t.Fatal("the second retry is not a replay")
	}
}

// partition is the DialFunc of a pool whose network a test can cut, as a
// partition would: cut closes every connection and refuses new ones until
// heal. Refusing matters: when pgx loses a connection mid-query it sends
// the server a cancel request on a new connection, which a real partition
// would not let through either.
type partition struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (p *partition) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil, errors.New("partition: the network is down")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	p.conns = append(p.conns, c)
	return c, nil
}

func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *partition) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// behindPartition returns a backend made by New on a pool of its own to
// dsn whose connections go through a partition the test can cut, the
// partition, and the pool's configuration; tune, when not nil, changes
// the configuration first. The test's cleanup closes the pool.
func behindPartition(t *testing.T, dsn string, tune func(*pgxpool.Config)) (*postgres.Backend, *partition, *pgxpool.Config) {
	t.Helper()
	link := &partition{}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.DialFunc = link.dial
	if tune != nil {
		tune(pcfg)
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, link, pcfg
}

// TestLostAnswerThenRetry cuts the network between client and server while
// a renew is blocked on the server, then lets the server go on: the
// statement commits although the client saw only unavailable. A retry with the same request
// id answers the outcome that took effect, flagged as a replay.
func TestLostAnswerThenRetry(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	b, link, _ := behindPartition(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["application_name"] = app
		c.MaxConns = 1
	})
	acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	req := protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"}

	tx := lockRow(t, dsn, "k")
	done := make(chan outcomeOf, 1)
	go func() {
		res, err := b.Renew(ctxT(t), req)
		done <- outcomeOf{res, err}
	}()
	blockedPID(t, app)
	link.cut()
	got := <-done
	wantErrStatus(t, "renew cut off", got.err, protocol.StatusUnavailable)
	t.Logf("cut off: %v", got.err)
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// The server does not notice the client left while it waits for the
	// lock; once the lock is free it renews and commits. Wait for its
	// record: that is the state the retry must report.
	observer := rawPool(t, dsn)
	deadline := time.Now().Add(10 * time.Second)
	for count(t, observer, "SELECT count(*) FROM leasestore_audit WHERE request_id = 'r'") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned renew never committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	link.heal()
	res, err := b.Renew(ctxT(t), req)
	wantStatus(t, "retry", res, err, protocol.StatusRenewed)
	if !res.Replayed {
		t.Fatal("the retry renewed again instead of replaying the renew that took effect")
	}
}

// TestDeadlineWhileBlockedByALock runs a renew that waits behind a row lock
// held by another transaction, with a short deadline: it must return timeout
// soon after the deadline, the server must have cancelled the statement (so
// it does not take effect later), the pool must stay usable, and a retry
// with the same request id must then renew.
func TestDeadlineWhileBlockedByALock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, &postgres.Config{MaxConns: 2})
	acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	req := protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: time.Hour, RequestID: "r"}
	tx := lockRow(t, dsn, "k")

	const deadline, margin = 300 * time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err = b.Renew(ctx, req)
	elapsed := time.Since(start)
	wantErrStatus(t, "blocked renew", err, protocol.StatusTimeout)
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("%v does not match ErrTimeout", err)
	}
	if elapsed < deadline || elapsed > deadline+margin {
		t.Fatalf("returned after %v, want within [%v, %v]", elapsed, deadline, deadline+margin)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("error %v: want the server's query_canceled (57014): the pool should cancel on the server", err)
	}
	t.Logf("timed out after %v: %v", elapsed, err)

	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	res, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g"})
	wantStatus(t, "get after the timeout", res, err, protocol.StatusFound)
	if !res.Lease.ExpiresAt.Equal(acq.Lease.ExpiresAt) {
		t.Fatalf("the cancelled renew took effect: expires %v, was %v", res.Lease.ExpiresAt, acq.Lease.ExpiresAt)
	}
	res, err = b.Renew(ctxT(t), req)
	wantStatus(t, "retry", res, err, protocol.StatusRenewed)
	if res.Replayed {
		t.Fatal("the retry is a replay of a cancelled statement")
	}
}
