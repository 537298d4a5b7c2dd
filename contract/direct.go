package contract

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// directCases call the harness's handles directly, not through a runtime,
// as code that uses a backend directly does (docs/library.md): a request
// the runtime refuses, the backend refuses with the runtime's answer, and
// writes nothing; a change without a request id (the runtime would make
// one; a backend makes none) is refused too.
func directCases() []testCase {
	return []testCase{
		{"direct", func(e *env) {
			if e.h.ServesLockDelays {
				e.t.Skip("the handles are clients of stores served elsewhere: the serving runtime validates and makes request ids")
			}
			held := e.acquire(e.a, "held", "w1", leaseTTL)
			before := e.snapshot("held")
			// Without a request id, twice each: a backend that took the
			// first would replay it to the second.
			c := &badCalls{e: e}
			ok := okRequests{e, held}
			for i := range 2 {
				r := ok.acquire()
				r.RequestID = ""
				r.Key = e.key(fmt.Sprintf("fresh-%d", i))
				c.acquire("no request id", r)
				rn := ok.renew()
				rn.RequestID = ""
				c.renew("no request id", rn)
				rl := ok.release()
				rl.RequestID = ""
				c.release("no request id", rl)
				rv := ok.revoke()
				rv.RequestID = ""
				c.revoke("no request id", rv)
			}
			for what, k := range map[string]protocol.Key{"empty name": e.key(""), "name control char": e.key("he\x00ld")} {
				c.get(what+" without a request id", protocol.GetRequest{Key: k})
			}
			calls := append(c.calls, e.invalidRequests(held)...)

			handles := []struct {
				name string
				b    protocol.Backend
				rt   *protocol.Runtime
			}{{"first handle", e.h.Backend, e.a}, {"second handle", e.h.Second, e.b}}
			for _, c := range calls {
				for _, h := range handles {
					what := h.name + ": " + c.name
					res, err := c.do(h.b)
					if c.op != protocol.OpGet && c.reqID == "" {
						// The runtime would make an id: its answer is no measure.
						e.expectNoRequestID(what, c.op, c.key, res, err)
						continue
					}
					wantRes, wantErr := c.do(h.rt)
					if c.reqID == "" {
						wantRes.RequestID = "" // a get's: the runtime made one
					}
					e.expectSameAnswer(what, res, err, wantRes, wantErr)
				}
			}
			// Subscribe takes a key as the requests do: a bad one is
			// refused with the runtime's answer (each bad key of the gets).
			for _, c := range calls {
				if c.op != protocol.OpGet || c.key.Validate() == nil {
					continue
				}
				for _, h := range handles {
					n, ok := h.b.(protocol.Notifier)
					if !ok {
						continue
					}
					what := h.name + ": subscribe to a key with " + strings.TrimPrefix(c.name, "get ")
					ch, cancel, err := n.Subscribe(e.ctx, c.key)
					if cancel != nil {
						cancel()
					}
					wantCh, wantCancel, wantErr := h.rt.Subscribe(e.ctx, c.key)
					if wantCancel != nil {
						wantCancel()
					}
					if protocol.StatusOf(wantErr) != protocol.StatusInvalid || wantCh != nil {
						e.t.Fatalf("%s: the runtime answered %v, want invalid: the case is wrong", what, wantErr)
					}
					if ch != nil {
						e.t.Errorf("%s: a subscription, want none", what)
					}
					e.expectSameError(what, err, wantErr)
				}
			}
			// Namespaces' after is a namespace or a place between two:
			// text no namespace can hold is refused (as GET
			// /v1/namespaces refuses it), and so is a limit out of range.
			for what, call := range map[string]struct {
				after string
				limit int
			}{
				"after not UTF-8":        {"a\xff", 10},
				"after control char":     {"a\x00", 10},
				"after formatting char":  {"a\u200b", 10},
				"after too long":         {strings.Repeat("n", protocol.MaxNamespaceLen+1), 10},
				"limit 0":                {"", 0},
				"limit over the maximum": {"", protocol.MaxListLimit + 1},
			} {
				for _, h := range handles {
					nl, ok := h.b.(protocol.NamespaceLister)
					if !ok {
						continue
					}
					what := h.name + ": namespaces with " + what
					page, err := nl.Namespaces(e.ctx, call.after, call.limit)
					var pe *protocol.Error
					if page != nil || !errors.As(err, &pe) || !errors.Is(err, protocol.ErrInvalid) || pe.Op != protocol.OpNamespaces ||
						(call.limit == 10) != strings.Contains(err.Error(), "after: ") {
						e.t.Errorf("%s: %q, error %v; want no page, invalid naming what is wrong", what, page, err)
					}
				}
			}
			e.unchanged("after invalid requests sent directly", before)
			for _, name := range []string{"fresh", "fresh-0", "fresh-1"} {
				if g := e.get(e.a, name); g != nil {
					e.t.Fatalf("get %s after invalid acquires sent directly: %s, want not_found", name, fmtLease(g))
				}
			}
			if recs := e.auditAll(audit.Query{}); len(recs) != 1 || recs[0].Key != "held" {
				e.t.Fatalf("audit after invalid requests sent directly: %+v, want the one acquire", recs)
			}
			// A read needs no request id: the runtime's would pass.
			res, err := e.h.Backend.Get(e.ctx, protocol.GetRequest{Key: held.Key})
			e.expect("get without a request id, sent directly", res, err, protocol.StatusFound)
			e.expectLease("get without a request id, sent directly", res.Lease, held)
		}},
		{"direct reused request id", func(e *env) {
			if e.h.ServesLockDelays {
				e.t.Skip("the handles are clients of stores served elsewhere: the serving runtime answers")
			}
			// A request id reused with other parameters is invalid: sent
			// directly, the backend answers it as the runtime does (the
			// result's Op, Key and RequestID set, and an *protocol.Error),
			// and writes nothing.
			held := e.acquire(e.a, "held", "w1", leaseTTL)
			first := e.acquireReq("first", "w1", leaseTTL)
			res, err := e.h.Backend.Acquire(e.ctx, first)
			e.expect("acquire sent directly", res, err, protocol.StatusAcquired)
			before := e.snapshot("held")
			c := &badCalls{e: e}
			ok := okRequests{e, held}
			r := ok.acquire()
			r.RequestID = first.RequestID
			c.acquire("reusing an acquire's request id", r)
			r = first
			r.Owner = "w2"
			c.acquire("reusing its request id with another owner", r)
			rn := ok.renew()
			rn.RequestID = first.RequestID
			c.renew("reusing an acquire's request id", rn)
			rl := ok.release()
			rl.RequestID = first.RequestID
			c.release("reusing an acquire's request id", rl)
			rv := ok.revoke()
			rv.RequestID = first.RequestID
			c.revoke("reusing an acquire's request id", rv)
			for _, c := range c.calls {
				for _, h := range []struct {
					name string
					b    protocol.Backend
					rt   *protocol.Runtime
				}{{"first handle", e.h.Backend, e.a}, {"second handle", e.h.Second, e.b}} {
					res, err := c.do(h.b)
					wantRes, wantErr := c.do(h.rt)
					e.expectSameAnswer(h.name+": "+c.name, res, err, wantRes, wantErr)
				}
			}
			e.unchanged("after reused request ids sent directly", before)
			if g := e.get(e.a, "fresh"); g != nil {
				e.t.Fatalf("get fresh after an acquire reusing a request id sent directly: %s, want not_found", fmtLease(g))
			}
		}},
		{"direct list", func(e *env) {
			if e.h.ServesLockDelays {
				e.t.Skip("the handles are clients of stores served elsewhere: the serving runtime validates")
			}
			e.acquire(e.a, "held", "w1", leaseTTL)
			for what, req := range map[string]protocol.ListRequest{
				"bad cursor":          {Namespace: e.ns, Cursor: "bogus", RequestID: e.rid()},
				"limit too big":       {Namespace: e.ns, Limit: protocol.MaxListLimit + 1, RequestID: e.rid()},
				"negative limit":      {Namespace: e.ns, Limit: -1},
				"empty namespace":     {RequestID: e.rid()},
				"prefix control char": {Namespace: e.ns, Prefix: "h\x00", RequestID: e.rid()},
				"owner bad utf8":      {Namespace: e.ns, Owner: "w\xff"},
				"request id newline":  {Namespace: e.ns, RequestID: "a\nb"},
			} {
				for _, h := range []struct {
					b  protocol.Backend
					rt *protocol.Runtime
				}{{e.h.Backend, e.a}, {e.h.Second, e.b}} {
					got, err := h.b.List(e.ctx, req)
					want, wantErr := h.rt.List(e.ctx, req)
					if req.RequestID == "" {
						want.RequestID = "" // the runtime made one
					}
					if !reflect.DeepEqual(got, want) {
						e.t.Errorf("list %s sent directly: %+v, want the runtime's %+v", what, got, want)
					}
					e.expectSameError("list "+what+" sent directly", err, wantErr)
				}
			}
			res, err := e.h.Backend.List(e.ctx, protocol.ListRequest{Namespace: e.ns})
			if err != nil || res.Status != protocol.StatusFound || len(res.Leases) != 1 {
				e.t.Fatalf("list without a request id, sent directly: %+v, %v; want found and the one lease", res, err)
			}
		}},
		{"direct renew many", func(e *env) {
			if e.h.ServesLockDelays {
				e.t.Skip("the handles are clients of stores served elsewhere: the serving runtime validates and makes request ids")
			}
			for n, h := range []struct {
				name string
				b    protocol.Backend
				rt   *protocol.Runtime
			}{{"first handle", e.h.Backend, e.a}, {"second handle", e.h.Second, e.b}} {
				br, ok := h.b.(protocol.BulkRenewer)
				if !ok {
					continue
				}
				good := e.acquire(h.rt, fmt.Sprintf("good-%d", n), "w1", leaseTTL)
				bad := e.acquire(h.rt, fmt.Sprintf("bad-%d", n), "w1", leaseTTL)
				records := e.auditCount()
				unchanged := e.snapshot(bad.Key.Name)
				e.clock.Advance(time.Second)
				renewOf := func(l protocol.Lease) protocol.RenewRequest {
					return protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: e.rid()}
				}
				members := map[string]protocol.RenewRequest{}
				m := renewOf(bad)
				m.RequestID = ""
				members["no request id"] = m
				m = renewOf(bad)
				m.Token = 0
				members["token 0"] = m
				m = renewOf(bad)
				m.TTL = -time.Second
				members["ttl -1s"] = m
				m = renewOf(bad)
				m.Owner = ""
				members["empty owner"] = m
				m = renewOf(bad)
				m.Key.Name = "bad\x00"
				members["key with a control character"] = m
				for what, m := range members {
					what = h.name + ": renew many with one member's " + what
					reqs := []protocol.RenewRequest{renewOf(good), m, renewOf(good)}
					got, err := br.RenewMany(e.ctx, reqs)
					if err != nil || len(got) != len(reqs) {
						e.t.Fatalf("%s: %d results, error %v; want 3 results and no error", what, len(got), err)
					}
					for _, i := range []int{0, 2} {
						e.expect(fmt.Sprintf("%s: result %d", what, i), got[i], got[i].Err(), protocol.StatusRenewed)
						records++
					}
					if m.RequestID == "" {
						e.expectNoRequestID(what+": result 1", protocol.OpRenew, m.Key, got[1], got[1].Err())
					} else {
						want, werr := h.rt.RenewMany(e.ctx, []protocol.RenewRequest{m})
						if werr != nil || len(want) != 1 {
							e.t.Fatalf("%s: the runtime answered %d results, error %v", what, len(want), werr)
						}
						e.expectSameAnswer(what+": result 1", got[1], nil, want[0], nil)
					}
					// Every member invalid: none is sent.
					got, err = br.RenewMany(e.ctx, []protocol.RenewRequest{m, m})
					if err != nil || len(got) != 2 || got[0].Status != protocol.StatusInvalid || got[1].Status != protocol.StatusInvalid {
						e.t.Fatalf("%s, twice: %+v, error %v; want two invalid results and no error", what, got, err)
					}
				}
				if n := e.auditCount(); n != records {
					e.t.Fatalf("%s: %d audit records after the renewals, want %d (the good members' only)", h.name, n, records)
				}
				unchanged.records = records
				e.unchanged(h.name+": the bad members' lease", unchanged)

				// More than protocol.MaxRenewMany: refused as a whole, as the runtime does.
				many := make([]protocol.RenewRequest, protocol.MaxRenewMany+1)
				for i := range many {
					many[i] = protocol.RenewRequest{Key: e.key("none"), Owner: "w1", Token: 1, RequestID: e.rid()}
				}
				got, err := br.RenewMany(e.ctx, many)
				want, wantErr := h.rt.RenewMany(e.ctx, many)
				if got != nil || want != nil {
					e.t.Errorf("%s: renew many of %d: %d results (the runtime %d), want none", h.name, len(many), len(got), len(want))
				}
				e.expectSameError(h.name+": renew many of too many", err, wantErr)
			}
		}},
	}
}

// expectSameAnswer checks that a direct call's answer is the runtime's:
// the same result, and the same error (an *protocol.Error with the same
// fields, its cause reading the same).
func (e *env) expectSameAnswer(what string, res protocol.Result, err error, wantRes protocol.Result, wantErr error) {
	e.t.Helper()
	if wantRes.Status != protocol.StatusInvalid {
		e.t.Fatalf("%s: the runtime answered %q, want invalid: the case is wrong", what, wantRes.Status)
	}
	if !reflect.DeepEqual(res, wantRes) {
		e.t.Errorf("%s: result %+v (lease %s), want the runtime's %+v", what, res, fmtLease(res.Lease), wantRes)
	}
	e.expectSameError(what, err, wantErr)
}

// expectSameError checks that err is wantErr's twin: both nil, or both an
// *protocol.Error with the same fields and text.
func (e *env) expectSameError(what string, err, wantErr error) {
	e.t.Helper()
	if wantErr == nil {
		if err != nil {
			e.t.Errorf("%s: error %v, want none", what, err)
		}
		return
	}
	var got, want *protocol.Error
	if !errors.As(err, &got) || !errors.As(wantErr, &want) {
		e.t.Errorf("%s: error %T %v, want the runtime's %T %v", what, err, err, wantErr, wantErr)
		return
	}
	if got.Op != want.Op || got.Status != want.Status || got.Key != want.Key || got.Lease != want.Lease ||
		got.Message != want.Message || err.Error() != wantErr.Error() || !errors.Is(err, want.Status.Sentinel()) {
		e.t.Errorf("%s: error %+v (%q), want the runtime's %+v (%q)", what, *got, err, *want, wantErr)
	}
}

// expectNoRequestID checks the answer to a change sent directly without a
// request id: invalid, naming the missing id, as the runtime answers an
// invalid request (the result's message the error's detail), and nothing
// else.
func (e *env) expectNoRequestID(what string, op protocol.Op, key protocol.Key, res protocol.Result, err error) {
	e.t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || !errors.Is(err, protocol.ErrInvalid) {
		e.t.Errorf("%s: status %q, error %v; want invalid (a backend makes no request ids)", what, res.Status, err)
		return
	}
	want := protocol.Result{Op: op, Status: protocol.StatusInvalid, Key: key, Message: pe.Detail()}
	if !reflect.DeepEqual(res, want) || pe.Op != op || pe.Key != key || pe.Lease != nil ||
		!strings.Contains(err.Error(), "request id: must not be empty") || !strings.Contains(err.Error(), "protocol.New") {
		e.t.Errorf("%s: result %+v, error %+v (%q); want %+v and an error naming the missing request id and protocol.New",
			what, res, *pe, err, want)
	}
}
