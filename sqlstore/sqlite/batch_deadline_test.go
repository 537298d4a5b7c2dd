package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A write whose deadline passes while its coalesced batch waits for
// the file's write lock, held by another connection (another process,
// leasectl gc, a second Backend), answered when that lock was let go or
// the busy timeout ended, seconds past its deadline, and could even commit
// then. A lone write, or one still queued, answers timeout at its deadline
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
	if !strings.Contains(a.err.Error(), "it was not written") {
		t.Fatalf("short write: %v; want it to say the write was not written", a.err)
	}
	if l := <-long; l.err != nil || l.res.Status != protocol.StatusAcquired {
		t.Fatalf("long write: %+v, %v; want acquired once the lock is let go", l.res, l.err)
	}
	for _, name := range []string{"first", "short"} {
		if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key(name)}); err != nil || r.Status != protocol.StatusNotFound {
			t.Fatalf("%s: a write answered timeout before its batch ran it was written: %+v, %v", name, r, err)
		}
	}
	if n := auditLen(t, b); n != 1 {
		t.Fatalf("audit has %d records, want only the long write's", n)
	}
}

// A write whose deadline passes once its batch ran it, while later writes
// of the batch still run, answers timeout at its deadline, not when the
// batch ends, saying that it may or may not take effect; the batch commits
// it all the same (the others' deadlines allow), and a retry with the
// same request id replays it. A release answered so still wakes the
// key's waiters once its batch commits.
func TestBatchMemberDeadlineAfterItsWriteRan(t *testing.T) {
	b := open(t, migratedFile(t), nil)
	if _, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Minute, RequestID: "held"}); err != nil {
		t.Fatal(err)
	}
	woken, unsubscribe, err := b.Subscribe(ctxT(t), key("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()

	release := sqlite.HoldWriter(b)
	defer release()
	const deadline = 300 * time.Millisecond
	type answer struct {
		res     protocol.Result
		err     error
		elapsed time.Duration
	}
	acquired, released := make(chan answer, 1), make(chan answer, 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	go func() {
		start := time.Now()
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "a"})
		acquired <- answer{res, err, time.Since(start)}
	}()
	waitQueued(ctxT(t), t, b, 1)
	go func() {
		start := time.Now()
		res, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "w", Token: 1, RequestID: "rel"})
		released <- answer{res, err, time.Since(start)}
	}()
	waitQueued(ctxT(t), t, b, 2)
	// The last write of the batch runs well past the others' deadline.
	slowUntil := time.Now().Add(deadline + 1500*time.Millisecond)
	slow := make(chan error, 1)
	go func() { slow <- sqlite.SlowWrite(ctxT(t), b, "slow", slowUntil) }()
	waitQueued(ctxT(t), t, b, 3)
	release()

	for name, ch := range map[string]chan answer{"acquire": acquired, "release": released} {
		a := <-ch
		if a.elapsed > deadline+time.Second {
			t.Fatalf("%s: a coalesced write with a %v deadline answered %q (err %v) after %v, when its batch ended",
				name, deadline, a.res.Status, a.err, a.elapsed.Round(10*time.Millisecond))
		}
		if protocol.StatusOf(a.err) != protocol.StatusTimeout || !strings.Contains(a.err.Error(), "may or may not take effect") ||
			!strings.Contains(a.err.Error(), "same request id") {
			t.Fatalf("%s: %+v, %v; want timeout saying the effect is unknown", name, a.res, a.err)
		}
	}
	if err := <-slow; err != nil {
		t.Fatalf("the slow write: %v", err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the release whose caller left before its batch committed woke no waiter")
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "a"})
	if err != nil || !res.Replayed || res.Status != protocol.StatusAcquired {
		t.Fatalf("retrying the acquire with its request id: %+v, %v; want a replay of the committed acquire", res, err)
	}
	if r, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("held")}); err != nil || r.Status != protocol.StatusNotFound {
		t.Fatalf("held: %+v, %v; want the release committed", r, err)
	}
}
