package memstore

import (
	"context"
	"sync"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var _ protocol.Notifier = (*Backend)(nil)

// subscriber is one [Backend.Subscribe] registration.
type subscriber struct {
	handle *Backend
	ch     chan struct{}
}

// waiters is a store's registry of subscribers by key.
type waiters struct {
	mu   sync.Mutex
	keys map[protocol.Key]map[*subscriber]struct{}
}

// signal wakes every subscriber of key, or every subscriber of handle h
// when h is non-nil. Sends never block: a pending signal absorbs the next.
func (w *waiters) signal(key protocol.Key, h *Backend) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, subs := range w.keys {
		if h == nil && k != key {
			continue
		}
		for s := range subs {
			if h != nil && s.handle != h {
				continue
			}
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
}

// Subscribe implements [protocol.Notifier]: a release or revoke of key
// through any handle on the store signals the channel once it took effect.
// Closing this handle signals its subscribers (their next attempt answers
// closed). A closed handle cannot subscribe.
func (b *Backend) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	if err := backendkit.RefuseSubscribe(key); err != nil {
		return nil, nil, err
	}
	if b.closed.Load() {
		return nil, nil, interpretError("", errHandleClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, interpretError("", err)
	}
	w := &b.store.waiters
	s := &subscriber{handle: b, ch: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.keys == nil {
		w.keys = make(map[protocol.Key]map[*subscriber]struct{})
	}
	if w.keys[key] == nil {
		w.keys[key] = make(map[*subscriber]struct{})
	}
	w.keys[key][s] = struct{}{}
	// Checked again once registered: a Close since the first check either
	// is seen here or signals s (it takes w.mu after setting closed).
	closed := b.closed.Load()
	w.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.keys[key], s)
			if len(w.keys[key]) == 0 {
				delete(w.keys, key)
			}
		})
	}
	if closed {
		cancel()
		return nil, nil, interpretError("", errHandleClosed)
	}
	return s.ch, cancel, nil
}
