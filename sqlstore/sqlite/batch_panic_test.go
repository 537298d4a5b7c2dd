package sqlite_test

import (
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
	type answer struct {
		res      protocol.Result
		err      error
		panicked any
	}
	call := func(f func() (protocol.Result, error)) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			var a answer
			defer func() {
				a.panicked = recover()
				ch <- a
			}()
			a.res, a.err = f()
		}()
		return ch
	}
	before := call(func() (protocol.Result, error) {
		return b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("before"), Owner: "o", TTL: time.Minute, RequestID: "before"})
	})
	waitQueued(ctxT(t), t, b, 1)
	bad := call(func() (protocol.Result, error) { return sqlite.PanickingWrite(ctxT(t), b, "one write's bug") })
	waitQueued(ctxT(t), t, b, 2)
	after := call(func() (protocol.Result, error) {
		return b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("after"), Owner: "o", TTL: time.Minute, RequestID: "after"})
	})
	waitQueued(ctxT(t), t, b, 3)
	release()

	if a := <-bad; a.panicked != "one write's bug" {
		t.Errorf("the panicking write: %q, %v, panic %v; want its own panic", a.res.Status, a.err, a.panicked)
	}
	for name, ch := range map[string]<-chan answer{"before": before, "after": after} {
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
