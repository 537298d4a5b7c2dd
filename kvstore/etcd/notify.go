package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// notifyPause and notifyMaxPause bound the wait of a subscription between
// a failed watch and the next (doubling while they keep failing).
const (
	notifyPause    = 100 * time.Millisecond
	notifyMaxPause = 2 * time.Second
)

// Subscribe watches the key's entries with etcd's Watch from the moment it
// returns: a deletion (a release, a revoke, the expiry of the etcd lease of
// the liveness or the lock-delay entry, a sweep) sends on ch. The watch
// needs a leader; when it fails (its member lost the leader for a few
// election timeouts, or is in an election as the watch moves to it), ch
// gets a signal (the waiter tries again, and learns why), and the watch is made again after a pause (notifyPause doubling
// to notifyMaxPause) until it is back or the subscription is cancelled;
// once it is back ch gets another signal, for a deletion while no watch
// was live. When the Backend is closed (or the client given to [New]),
// ch gets one last signal and no more; once Close has begun, Subscribe
// answers closed (Close waits for the watches it let start). ctx bounds
// the making of the first watch: when it ends first (a cluster that does
// not answer), Subscribe answers timeout matching ctx's error. A cluster
// that refuses the first watch answers as it does any call: a refusal of
// the user's permission matches [protocol.ErrForbidden].
// A Backend made by [Open] also closes its connections to a member whose
// watch stream stays silent (frozen: notifyFrozen), so that the watch
// moves to a member that answers (frozen.go).
// See [protocol.Notifier].
func (b *Backend) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	if err := backendkit.RefuseSubscribe(key); err != nil {
		return nil, nil, err
	}
	if err := b.open(protocol.OpAcquire); err != nil {
		return nil, nil, err
	}
	// Close ends wctx too: a watch being made again (on a cluster that does
	// not answer) ends with it.
	wctx, cancelWatch := context.WithCancel(clientv3.WithRequireLeader(b.watching))
	watch := func() clientv3.WatchChan {
		return b.cli.Watch(wctx, b.keys.lease(key), clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	}
	// etcd's client hands the first watch back only once the cluster
	// created it, waiting on wctx alone: the caller's context ends it too
	// until then, so that Subscribe answers by the caller's deadline on a
	// cluster that does not answer.
	callerEnded := context.AfterFunc(ctx, cancelWatch)
	wch := watch()
	select {
	case first, ok := <-wch:
		if !callerEnded() && ctx.Err() != nil { // the caller's context ended the watch
			cancelWatch()
			return nil, nil, b.interpret(ctx, protocol.OpAcquire, ctx.Err())
		}
		if !ok || first.Err() != nil || !first.Created {
			cancelWatch()
			if b.closed.Load() { // Close ended the watch
				return nil, nil, errClosed(protocol.OpAcquire)
			}
			if ok && first.Err() != nil { // the cluster's answer: a refusal of the user's permission, no leader, ...
				return nil, nil, b.interpret(ctx, protocol.OpAcquire, first.Err())
			}
			return nil, nil, backendkit.NewError(protocol.OpAcquire, protocol.StatusUnavailable, nil, "%s: cannot watch the key", b.shown)
		}
	case <-ctx.Done():
		callerEnded()
		cancelWatch()
		return nil, nil, b.interpret(ctx, protocol.OpAcquire, ctx.Err())
	case <-b.stop:
		callerEnded()
		cancelWatch()
		return nil, nil, errClosed(protocol.OpAcquire)
	}
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	// Through goTracked, so that Close waits for the goroutine or
	// Subscribe answers closed: never one started as Close waits.
	tracked := b.goTracked(func() {
		defer cancelWatch()
		b.subscribed() // a frozen member's connections are closed (frozen.go)
		defer b.unsubscribed()
		defer func() {
			select {
			case <-b.stop:
				signal() // the waiter's next attempt answers closed
			default:
			}
		}()
		pause, live := notifyPause, true
		for {
			select {
			case resp, ok := <-wch:
				if ok && resp.Err() == nil && !resp.Canceled {
					if resp.Created { // a watch made again: deletions before it went unseen
						pause, live = notifyPause, true
						signal()
					} else if len(resp.Events) > 0 {
						signal()
					}
					continue
				}
				if wctx.Err() != nil {
					return // cancelled
				}
				// The watch is over (an answer with an error is its last):
				// make it again after a pause, unless the client was closed.
				if live || b.cli.Ctx().Err() != nil {
					signal() // a deletion may have gone unseen
				}
				live = false
				if b.cli.Ctx().Err() != nil {
					return
				}
				select {
				case <-wctx.Done():
					return
				case <-b.stop:
					signal() // the waiter's next attempt answers closed
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, notifyMaxPause)
				wch = watch()
			case <-wctx.Done():
				return
			case <-b.stop:
				signal() // the waiter's next attempt answers closed
				return
			}
		}
	})
	if !tracked {
		cancelWatch()
		return nil, nil, errClosed(protocol.OpAcquire)
	}
	var once sync.Once
	return ch, func() { once.Do(cancelWatch) }, nil
}
