package backendkit

import (
	"context"
	"sync"
)

// Closer runs a backend's Close work once, in a goroutine of its own, so
// that Close answers by its context while that work waits for what is in
// flight, and the work finishes in the background. The work reports each
// such wait through [Closer.Await]; between them it must not block (it
// closes what the backend owns). The zero value is ready; it is safe for
// concurrent use.
type Closer struct {
	mu      sync.Mutex
	done    chan struct{} // closed once the work returned; nil before the first Close
	err     error         // the work's, set before done is closed
	waiting string        // what the work waits for (Await); "" while it waits for nothing
	changed chan struct{} // closed, and replaced, when waiting changes
}

// Close starts work at its first call and waits for it to return, then
// returns its error. When ctx ends first, or had ended already, Close goes
// on waiting while the work waits for nothing in flight, so that a
// backend with nothing in flight is closed even by a Close whose context
// has ended; once the work waits for something (see [Closer.Await]) it
// returns at once, with left naming that (and err nil): the work finishes
// in the background. A later call does not run work again: it waits, in
// the same way, for the first's work, and returns its error.
func (c *Closer) Close(ctx context.Context, work func() error) (left string, err error) {
	c.mu.Lock()
	if c.done == nil {
		done := make(chan struct{})
		c.done, c.changed = done, make(chan struct{})
		go func() {
			c.err = work()
			close(done)
		}()
	}
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
		return "", c.err
	case <-ctx.Done():
	}
	for {
		c.mu.Lock()
		left, changed := c.waiting, c.changed
		c.mu.Unlock()
		select {
		case <-done:
			return "", c.err // done first: the answer wins
		default:
		}
		if left != "" {
			return left, nil
		}
		select {
		case <-done:
			return "", c.err
		case <-changed:
		}
	}
}

// Await is a step of the work: try does the step when it can without
// waiting for anything in flight and reports whether it did; when it did
// not, wait does it, and meanwhile the work waits for step (what a Close
// cut off by its context names). try must never block on something in
// flight: a Close whose context ended waits for it.
func (c *Closer) Await(step string, try func() bool, wait func()) {
	if try() {
		return
	}
	c.set(step)
	defer c.set("")
	wait()
}

func (c *Closer) set(step string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting = step
	close(c.changed)
	c.changed = make(chan struct{})
}
