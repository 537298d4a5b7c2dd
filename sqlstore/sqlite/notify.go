package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// DefaultNotifyInterval is how often a Backend with waiters checks whether
// another connection committed (see [Config].NotifyInterval).
const DefaultNotifyInterval = 5 * time.Millisecond

// pollMinBackoff and pollMaxBackoff bound the poller's pause between a
// failed read and its next attempt (doubling while they keep failing).
const (
	pollMinBackoff = 50 * time.Millisecond
	pollMaxBackoff = 5 * time.Second
)

var _ protocol.Notifier = (*Backend)(nil)

// notifier wakes a Backend's waiters ([Backend.Subscribe]). A release or
// revoke through the Backend itself signals its waiters as soon as it
// commits. Commits of other connections (other processes, other Backends
// on the file) are found by a poller that runs only while someone waits:
// on a connection of its own it reads PRAGMA data_version every interval
// (a read of the shared WAL index, no disk access), and when that changed
// it reads the keys released or revoked since its last look from the audit
// trail (ids follow commit order on SQLite), and those renewed to end
// earlier than before (a waiter sleeps toward the expiry it last met), and
// signals their waiters (a renew that extends, the usual one, signals
// nobody); when
// a prune removed records it had not read (leasestore_audit_pruned's mark
// passed its last id), it signals every waiter.
// When a read fails, it signals every waiter (a release may have gone
// unseen) and, while anyone waits, reads a new baseline on a new
// connection after a pause (pollMinBackoff doubling to pollMaxBackoff);
// once that succeeds it signals every waiter again, for the commits it did
// not look at in between. It never leaves a waiter without a poller,
// but on a *sql.DB limited below MinOpenConns after New, where it lets
// go of its connection rather than keep every write waiting (see run).
type notifier struct {
	b        *Backend
	interval time.Duration

	mu    sync.Mutex
	keys  map[protocol.Key]map[chan struct{}]struct{}
	count int
	// owned holds the ids of release and revoke records this Backend
	// wrote (while anyone waits), so that one release is one signal: the
	// Backend signals its own once they commit, and the poller skips them.
	// An id is only the Backend's once its transaction committed: until
	// then (ownPending) the poller that meets it signals it (the
	// transaction may have been rolled back and the id taken by another
	// process's record) and marks it ownPolled, so that the Backend does
	// not signal it again.
	owned  map[int64]ownState
	poll   *poller // the running poller; nil when none
	closed bool
}

// ownState is where an id of owned stands.
type ownState int8

const (
	ownPending   ownState = iota // written, not known to be committed
	ownSignalled                 // committed and signalled by the Backend: the poller skips it
	ownPolled                    // signalled by the poller: the Backend does not signal it again
)

// poller is one run of the cross-process check.
type poller struct {
	ready chan struct{} // closed once the baseline is read (or err set)
	err   error
	done  chan struct{} // closed when the goroutine ended
}

// signalLocked wakes the waiters of key without blocking; n.mu is held.
func (n *notifier) signalLocked(key protocol.Key) {
	for ch := range n.keys[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// own marks the record id, written by this Backend in a transaction not
// yet committed, as its own (see owned), when someone waits; nobody polls
// otherwise.
func (n *notifier) own(id int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.count == 0 {
		return
	}
	if n.owned == nil {
		n.owned = make(map[int64]ownState)
	}
	n.owned[id] = ownPending
}

// committed signals the waiters of key, whose record id (0 for none) this
// Backend's write committed, unless the poller met the record first and
// signalled them; the poller skips it from here on.
func (n *notifier) committed(key protocol.Key, id int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, ok := n.owned[id]
	switch {
	case ok && st == ownPolled:
		delete(n.owned, id)
		return
	case ok:
		n.owned[id] = ownSignalled
	}
	n.signalLocked(key)
}

// forget unmarks a record id whose write did not take effect: the id may
// come back in another process's record.
func (n *notifier) forget(id int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.owned, id)
}

// signalAll wakes every waiter (the Backend is closing).
func (n *notifier) signalAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, subs := range n.keys {
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Subscribe implements [protocol.Notifier]. It returns once a release or
// revoke committed afterwards by any connection to the file is sure to be
// signalled (and a renew that shortens the lease: within about
// [Config].NotifyInterval, from this Backend too): through this Backend
// at once, from other connections within
// about [Config].NotifyInterval (while the poller's reads fail, by a
// signal to every waiter once one succeeds again). On a *sql.DB given to
// [New] and limited afterwards to fewer than [MinOpenConns] connections
// it is refused with invalid, naming the fix: its poller would keep the
// one connection while every write waited for it (protocol.AcquireWait
// then polls).
func (b *Backend) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	if err := backendkit.RefuseSubscribe(key); err != nil {
		return nil, nil, err
	}
	if b.closed.Load() {
		return nil, nil, b.closedError("")
	}
	if err := connsRefusal(b.db, "subscribe"); err != nil {
		return nil, nil, err
	}
	n := &b.notify
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.closed || b.closed.Load() { // Close began meanwhile
		n.mu.Unlock()
		return nil, nil, b.closedError("")
	}
	if n.keys == nil {
		n.keys = make(map[protocol.Key]map[chan struct{}]struct{})
	}
	if n.keys[key] == nil {
		n.keys[key] = make(map[chan struct{}]struct{})
	}
	n.keys[key][ch] = struct{}{}
	n.count++
	p := n.poll
	if p == nil {
		p = &poller{ready: make(chan struct{}), done: make(chan struct{})}
		n.poll = p
		go n.run(p)
	}
	n.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(n.keys[key], ch)
			if len(n.keys[key]) == 0 {
				delete(n.keys, key)
			}
			n.count--
			if n.count == 0 && n.poll == nil {
				n.owned = nil // no poller will look at them
			}
		})
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		cancel()
		return nil, nil, b.interpret(ctx, "", ctx.Err())
	}
	if p.err != nil {
		cancel()
		return nil, nil, b.interpret(ctx, "", p.err)
	}
	return ch, cancel, nil
}

// run is the poller's goroutine: it reads the baseline, closes p.ready,
// and polls until nobody waits, the Backend closes or its *sql.DB is
// limited below MinOpenConns (connsRefusal), letting go of its
// connection. A failed first
// baseline fails the subscribers that waited for it and ends the run (the
// next Subscribe starts another). A later failed read signals every
// waiter (a release may have gone unseen), lets the connection go and,
// after a pause, reads a new baseline on a new one; once it has one, it
// signals every waiter again (commits in between were not looked at) and
// polls on.
func (n *notifier) run(p *poller) {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, version, top, err := n.baseline(ctx)
	p.err = err
	close(p.ready)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		n.end(p)
		return
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	ticker := time.NewTicker(n.interval)
	defer ticker.Stop()
	var backoff time.Duration
	var retry time.Time // when a failed poller (conn nil) reads a baseline again
	for range ticker.C {
		n.mu.Lock()
		if n.count == 0 || n.closed {
			n.poll = nil
			n.owned = nil
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if connsRefusal(n.b.db, "") != nil {
			// The *sql.DB was limited below MinOpenConns after New: kept,
			// the connection would have every write wait for it. The
			// waiters keep this Backend's signals, and are woken now (the
			// commits of others go unseen from here on: they recheck);
			// the next Subscribe is refused, naming the fix.
			n.end(p)
			n.signalAll()
			return
		}
		if conn == nil {
			if time.Now().Before(retry) {
				continue
			}
			if conn, version, top, err = n.baseline(ctx); err == nil {
				backoff = 0
				n.forgetUpTo(top)
				n.signalAll() // commits since the failure went unseen
				continue
			}
		} else {
			var v int64
			if err = conn.QueryRowContext(ctx, qDataVersion).Scan(&v); err == nil && v != version {
				version = v
				top, err = n.wake(ctx, conn, top)
			}
			if err == nil {
				continue
			}
			n.signalAll() // a release may have gone unseen
		}
		if conn != nil {
			conn.Close()
			conn = nil
		}
		backoff = min(max(2*backoff, pollMinBackoff), pollMaxBackoff)
		retry = time.Now().Add(backoff)
	}
}

// forgetUpTo drops the owned ids up to top: a new baseline starts after
// them, so no look of the poller's will meet them.
func (n *notifier) forgetUpTo(top int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.owned {
		if id <= top {
			delete(n.owned, id)
		}
	}
}

// end forgets p as the running poller.
func (n *notifier) end(p *poller) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.poll == p {
		n.poll = nil
	}
}

// baseline takes a connection of the poller's own and reads where the
// file stands: its data_version and the newest audit id.
func (n *notifier) baseline(ctx context.Context) (conn *sql.Conn, version, top int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer cancel()
	conn, err = n.b.db.Conn(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := conn.QueryRowContext(ctx, qDataVersion).Scan(&version); err != nil {
		return conn, 0, 0, err
	}
	var pruned int64
	if err := conn.QueryRowContext(ctx, qWakeTop).Scan(&top, &pruned); err != nil {
		return conn, 0, 0, err
	}
	return conn, version, max(top, pruned), nil
}

// wake signals the waiters of the keys released, revoked or renewed to
// end earlier (qWakeKeys) after the record with id after, and returns the
// newest id. When a prune removed a
// record after it (the prune mark passed it), the records it did not read
// are gone, and wake signals every waiter instead.
func (n *notifier) wake(ctx context.Context, conn *sql.Conn, after int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer cancel()
	var top, pruned int64
	if err := conn.QueryRowContext(ctx, qWakeTop).Scan(&top, &pruned); err != nil {
		return after, err
	}
	if pruned > after {
		top = max(top, pruned)
		n.forgetUpTo(top)
		n.signalAll() // a release may have gone with the records pruned
		return top, nil
	}
	if top <= after {
		return after, nil // no new record (an acquire rolled back, a sweep, a prune)
	}
	rows, err := conn.QueryContext(ctx, qWakeKeys, after, top)
	if err != nil {
		return after, err
	}
	defer rows.Close()
	seen := map[protocol.Key]bool{}
	for rows.Next() {
		var id int64
		var k protocol.Key
		if err := rows.Scan(&id, &k.Namespace, &k.Name); err != nil {
			return after, err
		}
		n.mu.Lock()
		st, ok := n.owned[id]
		switch {
		case ok && st == ownSignalled: // this Backend's, committed and signalled
			delete(n.owned, id)
		default:
			if ok {
				// Its transaction may have been rolled back, and the id
				// be another process's: signalled here, not again by
				// the Backend once it learns that it committed.
				n.owned[id] = ownPolled
			}
			if !seen[k] {
				seen[k] = true
				n.signalLocked(k)
			}
		}
		n.mu.Unlock()
	}
	return top, rows.Err()
}

// close signals every waiter, so that their next attempt answers closed,
// and waits for the poller to let go of its connection.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	p := n.poll
	n.mu.Unlock()
	n.signalAll()
	if p != nil {
		<-p.done
	}
}

// tryClose is close when no poller runs (or the one that ran ended): it
// reports whether it closed n, without waiting.
func (n *notifier) tryClose() bool {
	n.mu.Lock()
	n.closed = true
	p := n.poll
	n.mu.Unlock()
	if p != nil {
		select {
		case <-p.done:
		default:
			return false
		}
	}
	n.signalAll()
	return true
}
