package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A reader that answers closed never answers again: Watch yields that
// answer once and ends, as it does for a cursor behind a prune, rather
// than read again every interval until its context ends. So for the
// backend's own handle closed under the watch, and for a RuntimeReader
// whose runtime was closed.
func TestWatchEndsWhenItsReaderIsClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func() (audit.Reader, *protocol.Runtime, func())
	}{
		{"backend", func() (audit.Reader, *protocol.Runtime, func()) {
			b := memstore.New(nil)
			return b, protocol.New(b, nil), func() { _ = b.Close(context.Background()) }
		}},
		{"runtime_reader", func() (audit.Reader, *protocol.Runtime, func()) {
			rt := protocol.New(memstore.New(nil), nil)
			return audit.RuntimeReader(rt), rt, func() { _ = rt.Close(context.Background()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, rt, closeIt := tc.open()
			defer rt.Close(context.Background())
			key := protocol.Key{Namespace: "ns", Name: "k"}
			if _, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			type item struct {
				rec audit.Record
				err error
			}
			items := make(chan item)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				for rec, err := range audit.Watch(ctx, r, audit.Query{Namespace: "ns"}, &audit.WatchConfig{Interval: time.Millisecond}) {
					select {
					case items <- item{rec, err}:
					case <-ctx.Done():
						return
					}
				}
			}()
			const bound = 2 * time.Second
			next := func(what string) (item, bool) {
				t.Helper()
				select {
				case it := <-items:
					return it, true
				case <-ended:
					return item{}, false
				case <-time.After(bound):
					t.Fatalf("%s: the watch neither yielded nor ended within %v", what, bound)
				}
				panic("unreachable")
			}
			if it, ok := next("the acquire"); !ok || it.err != nil || it.rec.Op != protocol.OpAcquire {
				t.Fatalf("first item %+v (yielded: %v), want the acquire's record", it, ok)
			}
			closeIt()
			it, ok := next("after the close")
			if !ok {
				t.Fatal("the watch ended after its reader was closed without saying why: want an error matching ErrClosed")
			}
			if !errors.Is(it.err, protocol.ErrClosed) {
				t.Fatalf("after the close the watch yielded record %d, error %v; want an error matching ErrClosed", it.rec.ID, it.err)
			}
			if it, ok := next("after the closed answer"); ok {
				if it.err != nil {
					t.Fatalf("the watch went on after its reader answered closed (a reader that never answers again): it read again: %v", it.err)
				}
				t.Fatalf("the watch went on after its reader answered closed: it yielded record %d", it.rec.ID)
			}
			if ctx.Err() != nil {
				t.Fatalf("the watch ended only with its context: %v", ctx.Err())
			}
		})
	}
}
