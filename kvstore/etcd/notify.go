package etcd

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// Subscribe watches the key's entries with etcd's Watch from the moment it
// returns: a deletion (a release, a revoke, the expiry of the etcd lease of
// the liveness or the lock-delay entry, a sweep) sends on ch. The watch needs a leader; when it
// fails, and when the Backend is closed, ch gets one last signal (the
// waiter tries again, and learns why) and no more.
// See [protocol.Notifier].
func (b *Backend) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	if err := b.open(protocol.OpAcquire); err != nil {
		return nil, nil, err
	}
	wctx, cancelWatch := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	wch := b.cli.Watch(wctx, b.keys.lease(key), clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	select {
	case first, ok := <-wch:
		if !ok || first.Err() != nil || !first.Created {
			cancelWatch()
			var err error
			if ok {
				err = first.Err()
			}
			return nil, nil, backendkit.NewError(protocol.OpAcquire, protocol.StatusUnavailable, err, "%s: cannot watch the key", b.shown)
		}
	case <-ctx.Done():
		cancelWatch()
		return nil, nil, b.interpret(ctx, protocol.OpAcquire, ctx.Err())
	case <-b.stop:
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
	b.watchers.Add(1)
	go func() {
		defer b.watchers.Done()
		defer cancelWatch()
		for {
			select {
			case resp, ok := <-wch:
				if !ok || resp.Err() != nil || resp.Canceled {
					signal()
					return
				}
				if len(resp.Events) > 0 {
					signal()
				}
			case <-wctx.Done():
				return
			case <-b.stop:
				signal() // the waiter's next attempt answers closed
				return
			}
		}
	}()
	var once sync.Once
	return ch, func() { once.Do(cancelWatch) }, nil
}
