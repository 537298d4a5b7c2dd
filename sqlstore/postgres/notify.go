package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Notifier = (*Backend)(nil)

// Waking waiters (protocol.AcquireWait) with LISTEN/NOTIFY, paid for only
// where someone waits.
//
// NOTIFY is not free: at commit a notifying transaction takes a lock that
// serializes every notifying commit of the cluster, and writes to the
// notification queue whether or not anyone listens. So the release and
// revoke statements notify only when a waiter is registered for their
// key, and the registry is PostgreSQL's lock table: a process with waiters
// holds, on its listener connection (a connection of its own, outside the
// pool), a shared session-level advisory lock per waited-for key, in the
// class waitLockClass, on the key's bucket: hashtext(namespace/name) &
// 1023 (waitLockMask). Keys share buckets, so a listener holds at most
// 1,024 entries of the cluster's lock table however many keys it waits for
// (PostgreSQL counts a session's repeated shared lock as one entry), and a
// release in a bucket where another key is waited for sends a
// notification nobody here acts on: the payload names the key. A release or revoke that took effect tries to take
// that lock exclusively for its transaction (pg_try_advisory_xact_lock,
// which never waits): when it fails, someone waits, and the statement
// notifies channel leasestore_wake with the key (and the schema, as
// schemas of one database share channels). When it succeeds nobody waits,
// nothing is queued, and the lock, held until commit, makes a waiter that
// registers meanwhile wait for the commit, so its first attempt sees the
// release: no release between registration and attempt goes unheard.
//
// The listener connection is opened at the first Subscribe and kept while
// anyone waits; once no key has had a waiter for Config.ListenerIdle
// (default DefaultListenerIdle) it is closed, which lets go of LISTEN and
// of every lock, and the next Subscribe opens a new one. Its session pins
// idle_session_timeout to 0 (pinSession), but something else may end it
// every so often (a DBA's job that terminates idle sessions, a network's
// idle cut-off): it then reconnects and takes the locks of the keys still
// waited for again. A release or revoke that committed while it was down
// found its key's lock free and notified nobody, and one notified just
// before the break may not have been read, so the listener compares the
// waited-for keys' rows (token and ended_token, keyStatesSQL: every
// release, revoke and acquire moves them, a renewal does not) read once
// the new connection holds every lock with the same rows read on the last
// connection before it took its locks, and signals the waiters of every
// key whose row differs or was not read then (first waited for later, or
// the read failed). A reconnection in which no key changed wakes nobody:
// it used to wake every waiter twice, a herd of attempts each time. When
// an attempt to connect fails, every waiter is signalled once (they are
// left to their Recheck until it can listen again), and so they are at
// Close.
const (
	notifyChannel = "leasestore_wake"
	waitLockClass = 1818583412 // writers' per-key lock class (queries.go) plus one
	// waitLockMask picks a waiter's lock id from its key's hash: 1,024
	// buckets. The statements here and in queries.go (wakeCTE, the batch
	// function) are built from it, so they agree.
	waitLockMask = "1023"
)

// The listener's statements: LISTEN, the schema that payloads are matched
// against, and the waiters' registry of one key ($1 namespace, $2 name,
// hashed into its bucket as the release and revoke statements hash it).
const (
	listenSQL     = `LISTEN ` + notifyChannel
	schemaNameSQL = `SELECT current_schema()`
	// whereSQL reads where a connection works: its database (a channel
	// is a database's own) and schema (the payloads name it), to compare
	// a Config.ListenDSN's with the pool's.
	whereSQL      = `SELECT current_database(), coalesce(current_schema(), '')`
	waitLockSQL   = `SELECT pg_advisory_lock_shared(1818583412, hashtext($1 || '/' || $2) & ` + waitLockMask + `)`
	waitUnlockSQL = `SELECT pg_advisory_unlock_shared(1818583412, hashtext($1 || '/' || $2) & ` + waitLockMask + `)`
	// keyStatesSQL reads the rows of the keys ($1 namespaces, $2 names):
	// the token and the ended token (0 for none, and both for no row).
	keyStatesSQL = `SELECT k.namespace, k.name, coalesce(l.token, 0), coalesce(l.ended_token, 0)
FROM unnest($1::text[], $2::text[]) AS k(namespace, name)
LEFT JOIN leasestore_leases l ON l.namespace = k.namespace AND l.name = k.name`
)

// keyState is a waited-for key's row as keyStatesSQL reads it.
type keyState struct{ token, ended int64 }

// DefaultListenerIdle is the default of [Config].ListenerIdle: how long
// the listener connection stays open once no waiter needs it.
const DefaultListenerIdle = 30 * time.Second

// errListenerIdle ends the listener's connection when nobody waited for
// its idle time. It never leaves the package.
var errListenerIdle = errors.New("postgres: the listener was idle")

// listenerBackoff bounds the pause between reconnection attempts.
const (
	listenerMinBackoff = 50 * time.Millisecond
	listenerMaxBackoff = 5 * time.Second
)

// lockCmd asks the listener goroutine to take (lock) or let go of a key's
// wait lock on its connection.
type lockCmd struct {
	key  protocol.Key
	lock bool
}

// waitedKey is the listener's record of one key that has waiters.
type waitedKey struct {
	subs   map[chan struct{}]struct{}
	locked chan struct{} // closed once the key's wait lock is held (or err set)
	err    error
}

// listener owns the LISTEN connection; see the comment above.
type listener struct {
	b    *Backend
	idle time.Duration // Config.ListenerIdle; 0 for the default
	dsn  string        // Config.ListenDSN; "" for the pool's

	mu        sync.Mutex
	keys      map[protocol.Key]*waitedKey
	queue     []lockCmd
	interrupt context.CancelFunc // ends the goroutine's wait for a notification; nil when it is not waiting
	started   bool               // a goroutine serves the listener (it clears started when it lets go, idle)
	closed    bool
	cancel    context.CancelFunc // ends the goroutine of the last start
	done      chan struct{}      // closed when the goroutine of the last start (and those before it) ended

	// seen holds the waited-for keys' rows as the current (or last)
	// connection read them before it took their locks; a key whose read
	// failed is missing. Only the goroutine serving the listener uses it.
	seen map[protocol.Key]keyState

	beforeReconnect func() // Config.testBeforeReconnect; nil outside tests
}

// idleFor returns how long the connection stays open once nobody waits.
func (l *listener) idleFor() time.Duration {
	if l.idle > 0 {
		return l.idle
	}
	return DefaultListenerIdle
}

// Subscribe implements [protocol.Notifier]: it returns once the key is
// registered in the database, so a release or revoke that commits
// afterwards, through any pool or process, notifies this process.
func (b *Backend) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	if err := backendkit.RefuseSubscribe(key); err != nil {
		return nil, nil, err
	}
	l := &b.listen
	if err := b.callRefusal(""); err != nil {
		return nil, nil, err
	}
	if b.pooled && l.dsn == "" {
		return nil, nil, errNoSignals
	}
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, backendkit.NewError("", protocol.StatusClosed, nil, "postgres: the backend was closed")
	}
	if !l.started {
		// A goroutine that let go of the connection (idle) may still be
		// closing it: the new one waits for it, so that close waits for
		// both.
		l.started = true
		l.b = b
		if l.keys == nil {
			l.keys = make(map[protocol.Key]*waitedKey)
		}
		ctx, cancel := context.WithCancel(context.Background())
		prev, done := l.done, make(chan struct{})
		l.cancel, l.done = cancel, done
		go func() {
			if prev != nil {
				<-prev
			}
			l.run(ctx, done)
		}()
	}
	wk := l.keys[key]
	if wk == nil {
		wk = &waitedKey{subs: make(map[chan struct{}]struct{}), locked: make(chan struct{})}
		l.keys[key] = wk
		l.enqueue(lockCmd{key: key, lock: true})
	}
	wk.subs[ch] = struct{}{}
	l.mu.Unlock()

	var once sync.Once
	cancel := func() { once.Do(func() { l.unsubscribe(key, ch) }) }
	select {
	case <-wk.locked:
	case <-ctx.Done():
		cancel()
		return nil, nil, interpretError("", ctx.Err())
	}
	if wk.err != nil {
		cancel()
		return nil, nil, wk.err
	}
	return ch, cancel, nil
}

// unsubscribe removes ch; the last subscriber of a key lets its lock go.
func (l *listener) unsubscribe(key protocol.Key, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wk := l.keys[key]
	if wk == nil {
		return
	}
	delete(wk.subs, ch)
	if len(wk.subs) == 0 {
		delete(l.keys, key)
		if !l.closed {
			l.enqueue(lockCmd{key: key, lock: false})
		}
	}
}

// enqueue queues c and interrupts the goroutine's wait; l.mu is held.
func (l *listener) enqueue(c lockCmd) {
	l.queue = append(l.queue, c)
	if l.interrupt != nil {
		l.interrupt()
		l.interrupt = nil
	}
}

// signal wakes the subscribers of key (every key when all is set).
func (l *listener) signal(key protocol.Key, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, wk := range l.keys {
		if !all && k != key {
			continue
		}
		for ch := range wk.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// run connects, serves until the connection breaks, and reconnects,
// until Close (ctx ends) or until nobody waited for the idle time; then it
// closes done. A connection made after one broke (or after a failed
// attempt) signals the waiters of the keys that changed meanwhile, once it
// holds every key's lock (see the comment above); a failed attempt
// signals every waiter, once until a connection is made again.
func (l *listener) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := listenerMinBackoff
	l.seen = nil
	signalled := false // every waiter was signalled since the last connection
	for again := false; ctx.Err() == nil; again = true {
		if again && l.beforeReconnect != nil {
			l.beforeReconnect()
		}
		conn, schema, before, after, err := l.connect(ctx, again)
		if err == nil {
			backoff = listenerMinBackoff
			if again {
				l.signalChanged(l.seen, after) // a release between the break and the locks was not notified
			}
			l.seen, signalled = before, false
			if l.seen == nil {
				l.seen = make(map[protocol.Key]keyState)
			}
			err = l.serve(ctx, conn, schema)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
			if errors.Is(err, errListenerIdle) {
				return // nobody waits: nothing to signal or fail
			}
		} else if !signalled && ctx.Err() == nil {
			// It cannot listen: a release may go unheard until it can.
			l.signal(protocol.Key{}, true)
			signalled = true
		}
		if ctx.Err() != nil {
			l.signal(protocol.Key{}, true) // closed: the waiters' next attempt answers so
			break
		}
		l.failPending(err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenerMaxBackoff)
	}
	l.failPending(backendkit.NewError("", protocol.StatusClosed, nil, "postgres: the backend was closed"))
}

// signalChanged wakes the waiters of each key of after whose row differs
// from seen's, or that seen lacks; of every key when after is nil (the
// read failed).
func (l *listener) signalChanged(seen, after map[protocol.Key]keyState) {
	if after == nil {
		l.signal(protocol.Key{}, true)
		return
	}
	for k, st := range after {
		if was, ok := seen[k]; !ok || was != st {
			l.signal(k, false)
		}
	}
}

// keyStates reads the rows of keys on conn (keyStatesSQL); nil when the
// read failed (the role may not read the table through a ListenDSN) or
// keys is empty.
func keyStates(ctx context.Context, conn *pgx.Conn, keys []protocol.Key) map[protocol.Key]keyState {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer cancel()
	ns, names := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		ns[i], names[i] = k.Namespace, k.Name
	}
	rows, err := conn.Query(ctx, keyStatesSQL, ns, names)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := make(map[protocol.Key]keyState, len(keys))
	for rows.Next() {
		var k protocol.Key
		var st keyState
		if err := rows.Scan(&k.Namespace, &k.Name, &st.token, &st.ended); err != nil {
			return nil
		}
		out[k] = st
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// failPending answers the subscribers still waiting for their key's lock
// with err, and forgets the queue: a new connection takes the locks of
// every key that still has subscribers.
func (l *listener) failPending(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = nil
	for k, wk := range l.keys {
		select {
		case <-wk.locked:
		default:
			wk.err = interpretError("", err)
			close(wk.locked)
			delete(l.keys, k) // its subscribers' cancel finds nothing to do
		}
	}
}

// connect opens the listener's connection with the pool's settings,
// listens, and takes the lock of every key that has subscribers. It
// returns those keys' rows read before it took the locks and, when again
// (a reconnection), after (nil when a read failed).
func (l *listener) connect(lctx context.Context, again bool) (conn *pgx.Conn, schema string, before, after map[protocol.Key]keyState, err error) {
	conn, schema, err = l.dial(lctx)
	if err != nil {
		return nil, "", nil, nil, err
	}
	ctx, cancel := context.WithTimeout(lctx, protocol.DefaultTimeout)
	defer cancel()
	l.mu.Lock()
	l.queue = nil // replaced by taking every current key's lock
	keys := make([]protocol.Key, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	before = keyStates(ctx, conn, keys)
	for _, k := range keys {
		if err := l.apply(lctx, conn, lockCmd{key: k, lock: true}); err != nil {
			_ = conn.Close(ctx)
			return nil, "", nil, nil, err
		}
	}
	if again {
		after = keyStates(ctx, conn, keys)
	}
	if len(keys) > 0 && (before == nil || (again && after == nil)) && conn.IsClosed() {
		return nil, "", nil, nil, errors.New("postgres: the listener's connection broke as it read the waited-for keys")
	}
	return conn, schema, before, after, nil
}

// dial opens the listener's connection with the pool's settings and
// listens.
func (l *listener) dial(lctx context.Context) (*pgx.Conn, string, error) {
	ctx, cancel := context.WithTimeout(lctx, protocol.DefaultTimeout)
	defer cancel()
	cfg := l.b.pool.Config().ConnConfig.Copy()
	if l.dsn != "" {
		if err := checkDSN(l.dsn, "Config.ListenDSN"); err != nil {
			return nil, "", err
		}
		c, err := pgx.ParseConfig(l.dsn)
		if err != nil {
			return nil, "", backendkit.NewError("", protocol.StatusInvalid, redacted(err, dsnPassword(l.dsn)),
				"postgres: parse Config.ListenDSN")
		}
		// leasestore's own parameter, which the server does not know (a
		// copy of the pool's DSN may carry it): only a session of its own
		// will do.
		if mode, ok := c.RuntimeParams[PoolerParam]; ok {
			delete(c.RuntimeParams, PoolerParam)
			if mode != PoolerSession {
				return nil, "", backendkit.NewError("", protocol.StatusUnavailable, nil,
					"postgres: Config.ListenDSN says %s=%s, but the listener needs a session of its own: "+
						"give it a direct connection to the server", PoolerParam, mode)
			}
		}
		cfg = c
	}
	// A wait for a notification is ended by a deadline on the socket when
	// a lock must be taken, and the connection stays usable; a cancel
	// request (the pool's handler) would be sent for nothing.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	var schema string
	// Not a pooled connection, so no AfterConnect: pinned here, and refused
	// when it does not reach the server directly (LISTEN and the wait
	// locks need a session of their own).
	direct, err := pinSession(ctx, conn, true, "")
	if err == nil && !direct {
		err = backendkit.NewError("", protocol.StatusUnavailable, nil,
			"postgres: the listener's connection goes through a pooler that does not keep sessions: "+
				"set Config.ListenDSN to a direct connection")
	}
	if err == nil {
		_, err = conn.Exec(ctx, listenSQL)
	}
	if err == nil {
		err = conn.QueryRow(ctx, schemaNameSQL).Scan(&schema)
	}
	if err == nil && l.dsn != "" {
		err = l.sameStore(ctx, conn)
	}
	if err != nil {
		_ = conn.Close(ctx)
		return nil, "", err
	}
	return conn, schema, nil
}

// sameStore refuses a listener connection made from Config.ListenDSN that
// works in another database or schema than the pool's connections: it
// would hear none of the store's releases, and its waiters would sleep
// until their recheck instead of polling.
func (l *listener) sameStore(ctx context.Context, conn *pgx.Conn) error {
	var db, schema, poolDB, poolSchema string
	if err := conn.QueryRow(ctx, whereSQL).Scan(&db, &schema); err != nil {
		return err
	}
	if err := l.b.pool.QueryRow(ctx, whereSQL).Scan(&poolDB, &poolSchema); err != nil {
		return err
	}
	if db != poolDB || schema != poolSchema {
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"postgres: Config.ListenDSN reaches schema %q of database %q, the pool schema %q of database %q, so it "+
				"would hear none of the store's releases: give it the pool's database and search_path", schema, db,
			poolSchema, poolDB)
	}
	return nil
}

// apply runs c on conn and, for a lock, tells the key's subscribers.
func (l *listener) apply(lctx context.Context, conn *pgx.Conn, c lockCmd) error {
	ctx, cancel := context.WithTimeout(lctx, protocol.DefaultTimeout)
	defer cancel()
	q := waitUnlockSQL
	if c.lock {
		q = waitLockSQL
	}
	_, err := conn.Exec(ctx, q, c.key.Namespace, c.key.Name)
	if err != nil || !c.lock {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if wk := l.keys[c.key]; wk != nil {
		select {
		case <-wk.locked:
		default:
			close(wk.locked)
		}
	}
	return nil
}

// serve runs queued lock commands and waits for notifications until the
// connection fails or the listener closes (ctx ends), or until no key had
// a waiter for the idle time: then it clears l.started, so that the next
// Subscribe starts a new listener, and returns errListenerIdle.
func (l *listener) serve(ctx context.Context, conn *pgx.Conn, schema string) error {
	for {
		l.mu.Lock()
		cmds := l.queue
		l.queue = nil
		var wctx context.Context
		var cancel context.CancelFunc
		idle := false
		if len(cmds) == 0 {
			if len(l.keys) == 0 {
				wctx, cancel = context.WithTimeout(ctx, l.idleFor())
				idle = true
			} else {
				wctx, cancel = context.WithCancel(ctx)
			}
			l.interrupt = cancel
		}
		l.mu.Unlock()
		if len(cmds) > 0 {
			// The rows of the keys to lock, read before their locks, for
			// the comparison of the next connection (see run).
			var lock []protocol.Key
			for _, c := range cmds {
				if c.lock {
					lock = append(lock, c.key)
				}
			}
			states := keyStates(ctx, conn, lock)
			for _, c := range cmds {
				if err := l.apply(ctx, conn, c); err != nil {
					return err
				}
				if st, ok := states[c.key]; ok && c.lock {
					l.seen[c.key] = st
				} else {
					delete(l.seen, c.key) // let go, or not read: woken at a reconnection
				}
			}
			continue
		}
		n, err := conn.WaitForNotification(wctx)
		l.mu.Lock()
		l.interrupt = nil
		if idle && errors.Is(wctx.Err(), context.DeadlineExceeded) && len(l.keys) == 0 && len(l.queue) == 0 && ctx.Err() == nil {
			l.started = false
			l.mu.Unlock()
			cancel()
			return errListenerIdle
		}
		l.mu.Unlock()
		interrupted := wctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if interrupted && !conn.IsClosed() {
				continue // a lock to take or let go
			}
			return err
		}
		l.dispatch(n, schema)
	}
}

// dispatch signals the waiters of the key a notification names, when it
// comes from this backend's schema.
func (l *listener) dispatch(n *pgconn.Notification, schema string) {
	if n == nil || n.Channel != notifyChannel {
		return
	}
	var p []string // [schema, namespace, name], see the release and revoke statements
	if err := json.Unmarshal([]byte(n.Payload), &p); err != nil || len(p) != 3 || p[0] != schema {
		return
	}
	l.signal(protocol.Key{Namespace: p[1], Name: p[2]}, false)
}

// tryClose is close when no goroutine serves the listener (or the last
// one ended): it reports whether it closed l, without waiting.
func (l *listener) tryClose() bool {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		cancel()
		return true
	default:
		return false
	}
}

// close stops the listener, closes its connection and signals every
// waiter, so that their next attempt answers closed. It also waits for a
// listener that let go of its connection, idle, to have closed it.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}
