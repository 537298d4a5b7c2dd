package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestBatchMemberPanicFailsAlone: a write whose change panics in a batch
// panics in its own caller only. The writes beside it in the batch are
// answered as if it had failed alone (they commit), none of their callers
// hears another write's panic.
func TestBatchMemberPanicFailsAlone(t *testing.T) {
	b := open(t, migratedFile(t), nil)
	release := sqlite.HoldWriter(b)
	defer release()
	before := callRecovering(func() (protocol.Result, error) {
		return b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("before"), Owner: "o", TTL: time.Minute, RequestID: "before"})
	})
	waitQueued(ctxT(t), t, b, 1)
	bad := callRecovering(func() (protocol.Result, error) { return sqlite.PanickingWrite(ctxT(t), b, "one write's bug") })
	waitQueued(ctxT(t), t, b, 2)
	after := callRecovering(func() (protocol.Result, error) {
		return b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("after"), Owner: "o", TTL: time.Minute, RequestID: "after"})
	})
	waitQueued(ctxT(t), t, b, 3)
	release()

	if a := <-bad; a.panicked != "one write's bug" {
		t.Errorf("the panicking write: %q, %v, panic %v; want its own panic", a.res.Status, a.err, a.panicked)
	}
	for name, ch := range map[string]<-chan panicAnswer{"before": before, "after": after} {
		a := <-ch
		if a.panicked != nil {
			t.Errorf("%s: panicked with another write's panic: %v", name, a.panicked)
			continue
		}
		wantStatus(t, name, a.res, a.err, protocol.StatusAcquired)
		got, err := b.Get(ctxT(t), protocol.GetRequest{Key: key(name)})
		wantStatus(t, fmt.Sprintf("get %s", name), got, err, protocol.StatusFound)
	}
}

// TestBatchLeftAfterPanicFailsAlone: the after function of a write whose
// caller left (its context ended while the batch ran it) runs in the
// batch's goroutine once the batch ended; its panic reaches no other
// caller of the batch, whose write committed.
func TestBatchLeftAfterPanicFailsAlone(t *testing.T) {
	b := open(t, migratedFile(t), nil)
	release := sqlite.HoldWriter(b)
	defer release()
	leftCtx, leave := context.WithCancel(ctxT(t))
	defer leave()
	ran := make(chan struct{})
	left := callRecovering(func() (protocol.Result, error) {
		return sqlite.WriteWithPanickingAfter(leftCtx, b, ran, "one after's bug")
	})
	waitQueued(ctxT(t), t, b, 1)
	other := callRecovering(func() (protocol.Result, error) {
		return b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("other"), Owner: "o", TTL: time.Minute, RequestID: "other"})
	})
	waitQueued(ctxT(t), t, b, 2)
	slow := callRecovering(func() (protocol.Result, error) {
		return protocol.Result{}, sqlite.SlowWrite(ctxT(t), b, "slow", time.Now().Add(time.Second))
	})
	waitQueued(ctxT(t), t, b, 3)
	release()
	<-ran
	leave()
	if a := <-left; a.panicked != nil || !errors.Is(a.err, protocol.ErrTimeout) {
		t.Fatalf("the caller that left: %q, %v, panic %v; want timeout", a.res.Status, a.err, a.panicked)
	}
	if a := <-other; a.panicked != nil {
		t.Fatalf("other: panicked with another write's after: %v", a.panicked)
	} else {
		wantStatus(t, "other", a.res, a.err, protocol.StatusAcquired)
	}
	if a := <-slow; a.panicked != nil || a.err != nil {
		t.Fatalf("slow write: %v, panic %v", a.err, a.panicked)
	}
}

// panicAnswer is what a call run by callRecovering answered, or the value
// it panicked with.
type panicAnswer struct {
	res      protocol.Result
	err      error
	panicked any
}

// callRecovering runs f in a goroutine of its own and sends what it
// answered, or its panic, on the channel returned.
func callRecovering(f func() (protocol.Result, error)) <-chan panicAnswer {
	ch := make(chan panicAnswer, 1)
	go func() {
		var a panicAnswer
		defer func() {
			a.panicked = recover()
			ch <- a
		}()
		a.res, a.err = f()
	}()
	return ch
}
