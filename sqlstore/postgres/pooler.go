package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// Connection poolers. A pooler in transaction (or statement) mode, such as
// PgBouncer with pool_mode=transaction, hands each transaction to whichever
// server connection is free, so session state does not stay with the
// client: settings made with SET leak onto other clients' connections,
// prepared statements and temporary objects are missing on the next
// transaction's connection, and LISTEN and session-level advisory locks
// stay behind on a connection that others use. The backend runs there
// without session state: no settings pinned with SET (checkSettings
// refuses the server's that would change answers), no named prepared
// statements (pgx's QueryExecModeCacheDescribe), no coalescing (its batch
// function is a temporary object), and no listener through the pooler:
// waiters are woken through [Config].ListenDSN, a direct connection, when
// it is set, and otherwise poll (protocol.WaitConfig.Recheck, one second
// by default), which Subscribe's error tells them.
//
// A pooler is found by the process id: a connection's BackendKeyData
// names the server process it reaches, and PgBouncer sends one of its own.
// A pooler that forwards the server's process id is not found: set
// pooler=transaction in the DSN, or [Config].Pooler.

// Values of [Config].Pooler and of the DSN parameter pooler.
const (
	// PoolerDetect (the default) compares the server's process id with
	// the one the connection was given: where they differ, a pooler is in
	// front and the backend runs as with [PoolerTransaction].
	PoolerDetect = ""
	// PoolerSession says that sessions are kept: a direct connection, or
	// a pooler in session mode (which detection would take for one that
	// does not keep them).
	PoolerSession = "session"
	// PoolerTransaction says that a pooler in transaction or statement
	// mode is in front: the backend keeps no session state (see above).
	PoolerTransaction = "transaction"
)

// PoolerParam is the DSN parameter that sets the pooler mode, as in
// postgres://app@pgbouncer:6432/prod?pooler=transaction. Open removes it
// before connecting (the server does not know it); a connection made
// otherwise from such a DSN would send it to the server, which refuses it.
const PoolerParam = "pooler"

// errSessionsNotKept reports, from a new connection of a pool that detects
// poolers, that a pooler is in front. It never leaves the package.
var errSessionsNotKept = errors.New("postgres: a connection pooler is in front of the server")

// poolerMode returns the pooler mode of cfg, else of the DSN's pooler
// parameter, which it removes from pcfg.
func poolerMode(cfg *Config, pcfg *pgxpool.Config) (string, error) {
	fromDSN, err := DSNPooler(pcfg.ConnConfig)
	if cfg.Pooler == PoolerDetect {
		return fromDSN, err
	}
	if err := checkPooler(cfg.Pooler); err != nil {
		return "", err
	}
	return cfg.Pooler, nil
}

// DSNPooler takes the DSN parameter pooler ([PoolerParam]) out of c, which
// the server would refuse, and returns the mode it names: [PoolerDetect]
// when it is absent or empty, [PoolerSession] or [PoolerTransaction];
// another value is an error (invalid) naming these. Open reads a DSN's
// mode with it, and leasectl migrate, which connects on its own.
func DSNPooler(c *pgx.ConnConfig) (string, error) {
	mode, ok := c.RuntimeParams[PoolerParam]
	if !ok {
		return PoolerDetect, nil
	}
	delete(c.RuntimeParams, PoolerParam)
	if err := checkPooler(mode); err != nil {
		return "", err
	}
	return mode, nil
}

// checkPooler refuses a pooler mode that is none of the three.
func checkPooler(mode string) error {
	switch mode {
	case PoolerDetect, PoolerSession, PoolerTransaction:
		return nil
	}
	return backendkit.NewError("", protocol.StatusInvalid, nil,
		"postgres: pooler %q: want %q (a pooler in transaction or statement mode), %q (sessions are kept) or none (detect)",
		mode, PoolerTransaction, PoolerSession)
}

// pinSession pins the session settings of a direct connection (see
// pinSettingsSQL; statementTimeout is the value to pin, "" to keep the
// server's) and reports whether c reaches the server directly. With detect
// false the connection is taken to be direct.
func pinSession(ctx context.Context, c *pgx.Conn, detect bool, statementTimeout string) (direct bool, err error) {
	var pid, st any // NULL: pin whatever the process id; keep statement_timeout
	if detect {
		pid = int64(c.PgConn().PID())
	}
	if statementTimeout != "" {
		st = statementTimeout
	}
	// Unnamed (QueryExecModeExec): a named statement prepared here would
	// stay behind on a pooler's server connection.
	var pinned pgtype.Text
	err = c.QueryRow(ctx, pinSettingsSQL, pgx.QueryExecModeExec, pid, st).Scan(&direct, &pinned)
	return direct, err
}

// throughPooler reports whether a connection of pool reaches the server
// through a pooler (see PoolerDetect).
func throughPooler(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer c.Release()
	return ThroughPooler(ctx, c.Conn())
}

// ThroughPooler reports whether c reaches the server through a pooler:
// the server's process id differs from the one the connection was given
// (see PoolerDetect). It prepares no named statement, which would stay
// behind on a pooler's server connection. leasectl migrate uses it on a
// connection of its own.
func ThroughPooler(ctx context.Context, c *pgx.Conn) (bool, error) {
	var pid int64
	if err := c.QueryRow(ctx, backendPIDSQL, pgx.QueryExecModeExec).Scan(&pid); err != nil {
		return false, err
	}
	return pid != int64(c.PgConn().PID()), nil
}

// errNoSignals is Subscribe's answer behind a transaction pooler without
// [Config].ListenDSN: the waiter polls. It matches [protocol.ErrNoNotifier]:
// no later subscription can succeed, so [protocol.WatchLease] stops at
// once instead of subscribing again for the whole hold
// (TestWatchLeaseThroughPoolerWithoutListenDSNReturnsAtOnce), and a served
// store answers its notification route 501 (the client's waiters poll).
var errNoSignals = backendkit.NewError("", protocol.StatusUnavailable, protocol.ErrNoNotifier,
	"postgres: no wake-ups through a transaction pooler (LISTEN needs a session): waiters poll; "+
		"set Config.ListenDSN to a direct connection to wake them at once")
