package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pooled connection the server ended while it sat idle (a DBA's
// pg_terminate_backend, idle_session_timeout, a restart) has the server's
// FATAL message and the end of the stream waiting in its socket. pgxpool
// pings only connections idle for over a second, so without a check the
// next operation would be sent on it and answer unavailable (57P01) on a
// healthy server. liveConn looks, before the use of a connection idle for
// at least liveCheckAfter (shouldPing), whether anything is
// waiting to be read, without sending anything: a read bounded by
// liveCheckWait, which an idle connection that is alive always runs into.
// A connection with something to read (or a read error) is dropped, and
// the pool hands out another or opens one.

// liveCheckWait bounds the read of liveConn. The server's message was in
// the socket well before the check, so the read returns it at once; a
// live connection costs this wait, no round trip.
const liveCheckWait = 50 * time.Microsecond

// liveCheckKey marks the context of liveConn's read, so that the
// connection's context watcher (contextWatcher) ends the read by its
// deadline alone, without the cancel request it sends for a statement.
type liveCheckKey struct{}

// liveCheckAfter is how long a connection must have sat idle for the pool
// to look at it (shouldPing): one handed back and taken again at once, as
// under load, costs nothing, and one idle long enough for a server to end
// it costs liveCheckWait.
const liveCheckAfter = time.Millisecond

// shouldPing is the pool's ShouldPing: pgxpool's own rule (a ping, one
// round trip, for a connection idle over a second), and below that, for a
// connection idle at least liveCheckAfter, liveConn's look, which sends
// nothing; when it finds the connection ended it asks for the ping, which
// fails, and the pool drops the connection and takes another.
func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	switch {
	case p.IdleDuration > time.Second:
		return true
	case p.IdleDuration < liveCheckAfter:
		return false
	}
	return !liveConn(p.Conn)
}

// liveConn reports whether conn may be used (false: the server ended it).
func liveConn(conn *pgx.Conn) bool {
	pc := conn.PgConn()
	if pc.IsClosed() || pc.IsBusy() {
		return !pc.IsClosed()
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), liveCheckKey{}, true), liveCheckWait)
	defer cancel()
	_, err := pc.ReceiveMessage(ctx)
	// Only a read that ran into its deadline found nothing: a message
	// (an idle connection gets none we wait for) or another error means
	// the server ended it or is about to.
	return err != nil && pgconn.Timeout(err) && !pc.IsClosed()
}

// contextWatcher is the connections' context watcher: a statement's
// context that ends sends the server a cancel request, with the
// connection's deadline (cancelGrace later) as a fallback (see Open);
// liveConn's read is ended by the deadline alone, at once.
type contextWatcher struct {
	cancel   *pgconn.CancelRequestContextWatcherHandler
	deadline *pgconn.DeadlineContextWatcherHandler
	checking bool // the context that ended was liveConn's
}

func newContextWatcher(c *pgconn.PgConn) ctxwatch.Handler {
	return &contextWatcher{
		cancel:   &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace},
		deadline: &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()},
	}
}

// HandleCancel is called when the context of a read or write ends.
func (w *contextWatcher) HandleCancel(ctx context.Context) {
	if w.checking = ctx.Value(liveCheckKey{}) != nil; w.checking {
		w.deadline.HandleCancel(ctx)
		return
	}
	w.cancel.HandleCancel(ctx)
}

// HandleUnwatchAfterCancel is called when the read or write whose context
// ended returns.
func (w *contextWatcher) HandleUnwatchAfterCancel() {
	if w.checking {
		w.checking = false
		w.deadline.HandleUnwatchAfterCancel()
		return
	}
	w.cancel.HandleUnwatchAfterCancel()
}
