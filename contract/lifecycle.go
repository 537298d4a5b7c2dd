package contract

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leasestore/leasestore/protocol"
)

// closeCtx returns a context for Close calls.
func (e *env) closeCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// expectClosed checks that every operation on rt answers closed.
func (e *env) expectClosed(rt *protocol.Runtime, l protocol.Lease) {
	e.t.Helper()
	calls := map[string]func() (protocol.Result, error){
		"acquire": func() (protocol.Result, error) { return rt.Acquire(e.ctx, e.acquireReq("new", "w1", leaseTTL)) },
		"renew": func() (protocol.Result, error) {
			return rt.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL})
		},
		"release": func() (protocol.Result, error) {
			return rt.Release(e.ctx, protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token})
		},
		"revoke": func() (protocol.Result, error) {
			return rt.Revoke(e.ctx, protocol.RevokeRequest{Key: l.Key, Actor: "ops", Reason: "r"})
		},
		"get": func() (protocol.Result, error) { return rt.Get(e.ctx, protocol.GetRequest{Key: l.Key}) },
	}
	for name, call := range calls {
		res, err := call()
		e.expect(name+" after close", res, err, protocol.StatusClosed)
	}
	res, err := rt.List(e.ctx, protocol.ListRequest{Namespace: e.ns})
	if res.Status != protocol.StatusClosed || len(res.Leases) != 0 {
		e.t.Fatalf("list after close: status %q, %d leases", res.Status, len(res.Leases))
	}
	e.checkErr("list after close", err, protocol.StatusClosed, nil)
	e.checkErr("health after close", rt.Health(e.ctx), protocol.StatusClosed, nil)
}

func lifecycleCases() []testCase {
	return []testCase{
		{"health", func(e *env) {
			for i, rt := range []*protocol.Runtime{e.a, e.b} {
				if err := rt.Health(e.ctx); err != nil {
					e.t.Fatalf("health of handle %d: %v", i+1, err)
				}
			}
		}},
		{"close_second_handle", func(e *env) {
			l := e.acquire(e.b, "job", "w1", leaseTTL)
			before := e.snapshot("job")
			if err := e.b.Close(e.closeCtx()); err != nil {
				e.t.Fatalf("close: %v", err)
			}
			if err := e.b.Close(e.closeCtx()); err != nil {
				e.t.Fatalf("second close: %v", err)
			}
			e.expectClosed(e.b, l)
			// The store and the other handle are not affected.
			e.unchanged("after closing the second handle", before)
			e.expectLease("get through the first handle", e.get(e.a, "job"), l)
			if err := e.a.Health(e.ctx); err != nil {
				e.t.Fatalf("health of the first handle: %v", err)
			}
			e.release(e.a, l)
		}},
		{"close_first_handle", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			if err := e.a.Close(e.closeCtx()); err != nil {
				e.t.Fatalf("close: %v", err)
			}
			e.expectClosed(e.a, l)
			e.expectLease("get through the second handle", e.get(e.b, "job"), l)
			e.release(e.b, l)
			e.acquire(e.b, "job", "w2", leaseTTL)
		}},
		{"closed_backend_answers_closed", func(e *env) {
			// The backend itself, not a runtime (which answers closed
			// without asking its backend): closed after its own Close,
			// for every call it offers.
			l := e.acquire(e.b, "job", "w1", leaseTTL)
			if err := e.h.Second.Close(e.closeCtx()); err != nil {
				e.t.Fatalf("close the second handle: %v", err)
			}
			ExpectClosed(e.t, e.h.Second, l)
			// The store and the other handle are not affected.
			e.expectLease("get through the first handle", e.get(e.a, "job"), l)
			e.release(e.a, l)
		}},
		{"close_races_operations", func(e *env) {
			// Operations racing with Close answer their real outcome or
			// closed: never unavailable or timeout.
			const workers = 8
			var (
				started sync.WaitGroup
				wg      sync.WaitGroup
				mu      sync.Mutex
				bad     []string
				closed  atomic.Int64
			)
			allowed := func(op string, st protocol.Status, err error, ok ...protocol.Status) {
				if st == protocol.StatusClosed {
					closed.Add(1)
					return
				}
				for _, s := range ok {
					if st == s {
						return
					}
				}
				mu.Lock()
				defer mu.Unlock()
				bad = append(bad, fmt.Sprintf("%s: %q %v", op, st, err))
			}
			started.Add(workers)
			for w := range workers {
				owner := fmt.Sprintf("w%d", w)
				k := e.key(fmt.Sprintf("k%d", w%3))
				wg.Go(func() {
					first := true
					for i := 0; i < 100_000; i++ {
						res, err := e.a.Acquire(e.ctx, protocol.AcquireRequest{Key: k, Owner: owner, TTL: leaseTTL})
						allowed("acquire", res.Status, err, protocol.StatusAcquired, protocol.StatusConflict)
						if res.Status == protocol.StatusAcquired {
							rel, err := e.a.Release(e.ctx, protocol.ReleaseRequest{Key: k, Owner: owner, Token: res.Lease.Token})
							allowed("release", rel.Status, err, protocol.StatusReleased)
						}
						g, err := e.a.Get(e.ctx, protocol.GetRequest{Key: k})
						allowed("get", g.Status, err, protocol.StatusFound, protocol.StatusNotFound)
						if first {
							started.Done()
							first = false
						}
						if res.Status == protocol.StatusClosed || g.Status == protocol.StatusClosed {
							return
						}
					}
					mu.Lock()
					bad = append(bad, owner+": never saw closed")
					mu.Unlock()
				})
			}
			started.Wait()
			if err := e.a.Close(e.closeCtx()); err != nil {
				e.t.Fatalf("close while operations run: %v", err)
			}
			wg.Wait()
			if len(bad) > 0 {
				e.t.Fatalf("%d outcomes neither real nor closed, first: %s", len(bad), bad[0])
			}
			if closed.Load() == 0 {
				e.t.Fatal("no operation answered closed")
			}
			// The store is consistent and served by the other handle.
			for i := range 3 {
				name := fmt.Sprintf("k%d", i)
				if l := e.get(e.b, name); l != nil {
					// A worker may have acquired just before Close and
					// then seen closed on its release.
					e.release(e.b, *l)
				}
				e.acquire(e.b, name, "after", leaseTTL)
			}
		}},
	}
}
