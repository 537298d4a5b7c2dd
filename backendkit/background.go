package backendkit

import (
	"context"
	"sync"
	"time"
)

// Background runs work that outlives the call that started it (a clean-up
// the caller stopped waiting for once its context ended) so that a
// backend's Close can wait for it. The zero value is ready; it is safe for
// concurrent use. Each piece of work must end by itself (bound it with a
// timeout): Wait waits for all of it.
type Background struct {
	mu      sync.Mutex
	closing bool
	running int // work in progress (mu), for TryWait
	wg      sync.WaitGroup
}

// Go runs fn in a goroutine that b tracks and returns a channel closed
// when fn returned; nil, fn not run, once Wait was called.
func (b *Background) Go(fn func()) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil
	}
	b.wg.Add(1)
	b.running++
	done := make(chan struct{})
	go func() {
		defer b.wg.Done()
		defer close(done)
		defer func() {
			b.mu.Lock()
			b.running--
			b.mu.Unlock()
		}()
		fn()
	}()
	return done
}

// Wait refuses new work and waits for the work in progress.
func (b *Background) Wait() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.wg.Wait()
}

// TryWait refuses new work, as Wait does, and reports whether no work is
// in progress (then Wait returns at once), without waiting.
func (b *Background) TryWait() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closing = true
	return b.running == 0
}

// GoAwait runs fn as Go does and waits for it until ctx ends and grace
// more, so that a caller cut off by its deadline answers about then while
// fn goes on in the background. It returns at once when Wait was called
// (fn not run).
func (b *Background) GoAwait(ctx context.Context, grace time.Duration, fn func()) {
	done := b.Go(fn)
	if done == nil {
		return
	}
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
