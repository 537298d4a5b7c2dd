package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// rev73: a write whose deadline passes while its coalesced batch waits for
// the file's write lock, held by another connection (another process,
// leasectl gc, a second Backend), answers when that lock is let go or the
// busy timeout ends, seconds past its deadline, and may even commit then.
// A lone write, or one still queued, answers timeout at its deadline
// (TestWriteBlockedPastDeadlineTimesOut, TestQueuedWriterTimesOut); a
// batch member must too: nothing of the batch is written while it waits
// for the lock, so answering timeout (and leaving the write out) is safe.
func TestBatchMemberDeadlineWhileAnotherConnectionHoldsTheLock(t *testing.T) {
	path := migratedFile(t)
	b := open(t, path, nil) // busy timeout 5s
	release := holdWriteLock(t, path)

	type answer struct {
		res     protocol.Result
		err     error
		elapsed time.Duration
	}
	run := func(name string, timeout time.Duration) chan answer {
		ch := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Minute, RequestID: name})
			ch <- answer{res, err, time.Since(start)}
		}()
		return ch
	}
	// The first write takes the Backend's write slot and waits for the lock
	// alone, until its deadline.
	first := run("first", 400*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	// These two queue behind it and go as one batch when it gives up.
	const shortDeadline = 800 * time.Millisecond
	short := run("short", shortDeadline)
	long := run("long", 20*time.Second)
	waitQueued(ctxT(t), t, b, 2)

	// The other connection lets go of the lock 3s on, well after the short
	// write's deadline (and before the 5s busy timeout).
	time.AfterFunc(3*time.Second, release)

	if a := <-first; protocol.StatusOf(a.err) != protocol.StatusTimeout {
		t.Fatalf("first write: %+v, %v; want timeout", a.res, a.err)
	}
	a := <-short
	if a.elapsed > shortDeadline+time.Second {
		t.Fatalf("a coalesced write with a %v deadline answered %q (err %v) after %v, %v past its deadline, "+
			"while its batch waited for another connection's write lock",
			shortDeadline, a.res.Status, a.err, a.elapsed.Round(10*time.Millisecond), (a.elapsed - shortDeadline).Round(10*time.Millisecond))
	}
	if protocol.StatusOf(a.err) != protocol.StatusTimeout {
		t.Fatalf("short write: %+v, %v; want timeout", a.res, a.err)
	}
	if l := <-long; l.err != nil || l.res.Status != protocol.StatusAcquired {
		t.Fatalf("long write: %+v, %v; want acquired once the lock is let go", l.res, l.err)
	}
}
