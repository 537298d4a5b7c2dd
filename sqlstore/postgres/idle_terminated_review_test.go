package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestIdleConnectionsEndedByTheServerAnswerNoOutage: a DBA ends the
// pool's idle sessions (pg_terminate_backend, as maintenance scripts and
// "kill idle connections" jobs do; a server's idle_session_timeout or a
// restart leaves the same state). The server is up; nothing was in
// flight. The next operation on each pooled connection must not answer
// unavailable: the pool hands out the ended connection without a check
// (pgxpool pings only connections idle over a second), and the backend
// passes the server's FATAL 57P01 on as an outage. Health answering
// unavailable turns /readyz red on a healthy store, once per pooled
// connection.
func TestIdleConnectionsEndedByTheServerAnswerNoOutage(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"health", "get"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			app := appName(t)
			b := openBackend(t, dsn, &postgres.Config{ApplicationName: app, MaxConns: 2})
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute,
				RequestID: "a"})
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			raw := rawConn(t, pgtest.ServerDSN(t))
			mustExec(t, raw, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app)
			for count(t, raw, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app) > 0 {
				time.Sleep(5 * time.Millisecond)
			}
			switch op {
			case "health":
				if err := b.Health(ctxT(t)); err != nil {
					t.Fatalf("health after the idle sessions were ended, server up: %v", err)
				}
			case "get":
				res, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k")})
				if err != nil || res.Status != protocol.StatusFound {
					t.Fatalf("get after the idle sessions were ended, server up: %s, %v", res.Status, err)
				}
			}
		})
	}
}
