package contract

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// badNames are key names, owners and similar text fields that no operation accepts.
var badNames = []string{
	"",
	"a\x00b",
	"line\nbreak",
	"tab\there",
	"del\x7f",
	"c1\u0085control",
	"bad\xffutf8",
	"\xc3", // a truncated two-byte sequence
}

func invalidCases() []testCase {
	return append(directCases(), []testCase{
		{"requests", func(e *env) {
			held := e.acquire(e.a, "held", "w1", leaseTTL)
			before := e.snapshot("held")
			long := func(n int) string { return strings.Repeat("k", n) }
			type call struct {
				name string
				do   func(rt *protocol.Runtime) (protocol.Result, error)
			}
			var calls []call
			acquire := func(name string, req protocol.AcquireRequest) {
				calls = append(calls, call{"acquire " + name, func(rt *protocol.Runtime) (protocol.Result, error) { return rt.Acquire(e.ctx, req) }})
			}
			renew := func(name string, req protocol.RenewRequest) {
				calls = append(calls, call{"renew " + name, func(rt *protocol.Runtime) (protocol.Result, error) { return rt.Renew(e.ctx, req) }})
			}
			release := func(name string, req protocol.ReleaseRequest) {
				calls = append(calls, call{"release " + name, func(rt *protocol.Runtime) (protocol.Result, error) { return rt.Release(e.ctx, req) }})
			}
			revoke := func(name string, req protocol.RevokeRequest) {
				calls = append(calls, call{"revoke " + name, func(rt *protocol.Runtime) (protocol.Result, error) { return rt.Revoke(e.ctx, req) }})
			}
			get := func(name string, req protocol.GetRequest) {
				calls = append(calls, call{"get " + name, func(rt *protocol.Runtime) (protocol.Result, error) { return rt.Get(e.ctx, req) }})
			}
			okAcq := func() protocol.AcquireRequest { return e.acquireReq("fresh", "w1", leaseTTL) }
			okRen := func() protocol.RenewRequest {
				return protocol.RenewRequest{Key: held.Key, Owner: held.Owner, Token: held.Token, TTL: renewTTL, RequestID: e.rid()}
			}
			okRel := func() protocol.ReleaseRequest {
				return protocol.ReleaseRequest{Key: held.Key, Owner: held.Owner, Token: held.Token, RequestID: e.rid()}
			}
			okRev := func() protocol.RevokeRequest {
				return protocol.RevokeRequest{Key: held.Key, Actor: "ops", Reason: "r", RequestID: e.rid()}
			}
			badKeys := map[string]protocol.Key{
				"too long name":      e.key(long(protocol.MaxNameLen + 1)),
				"too long namespace": {Namespace: long(protocol.MaxNamespaceLen + 1), Name: "held"},
			}
			for _, b := range badNames {
				badKeys[fmt.Sprintf("name %q", b)] = e.key(b)
				badKeys[fmt.Sprintf("namespace %q", b)] = protocol.Key{Namespace: b, Name: "held"}
			}
			for what, k := range badKeys {
				r := okAcq()
				r.Key = k
				acquire(what, r)
				rn := okRen()
				rn.Key = k
				renew(what, rn)
				rl := okRel()
				rl.Key = k
				release(what, rl)
				rv := okRev()
				rv.Key = k
				revoke(what, rv)
				get(what, protocol.GetRequest{Key: k})
			}
			for _, b := range append(badNames[1:], long(protocol.MaxOwnerLen+1)) {
				r := okAcq()
				r.Owner = b
				acquire(fmt.Sprintf("owner %.20q", b), r)
				rn := okRen()
				rn.Owner = b
				renew(fmt.Sprintf("owner %.20q", b), rn)
				rl := okRel()
				rl.Owner = b
				release(fmt.Sprintf("owner %.20q", b), rl)
				rv := okRev()
				rv.Actor = b
				revoke(fmt.Sprintf("actor %.20q", b), rv)
				r = okAcq()
				r.RequestID = b
				acquire(fmt.Sprintf("request id %.20q", b), r)
			}
			for _, b := range badNames[1:] {
				rv := okRev()
				rv.Reason = b
				revoke(fmt.Sprintf("reason %q", b), rv)
			}
			// An empty owner, actor or reason; an empty request id is
			// replaced by a generated one, so it is not in this list.
			r := okAcq()
			r.Owner = ""
			acquire("empty owner", r)
			rn := okRen()
			rn.Owner = ""
			renew("empty owner", rn)
			rl := okRel()
			rl.Owner = ""
			release("empty owner", rl)
			rv := okRev()
			rv.Actor = ""
			revoke("empty actor", rv)
			rv = okRev()
			rv.Reason = ""
			revoke("empty reason", rv)
			rv = okRev()
			rv.Reason = strings.Repeat("r", protocol.MaxReasonLen+1)
			revoke("too long reason", rv)
			r = okAcq()
			r.RequestID = long(protocol.MaxRequestIDLen + 1)
			acquire("too long request id", r)
			for _, ttl := range []time.Duration{0, -time.Second, protocol.MinTTL - time.Microsecond, protocol.MaxTTL + time.Millisecond, 1<<63 - 1} {
				r := okAcq()
				r.TTL = ttl
				acquire(fmt.Sprintf("ttl %v", ttl), r)
				if ttl != 0 { // a renew without a ttl keeps the lease's own
					rn := okRen()
					rn.TTL = ttl
					renew(fmt.Sprintf("ttl %v", ttl), rn)
				}
			}
			for _, token := range []int64{0, -1, -held.Token} {
				rn := okRen()
				rn.Token = token
				renew(fmt.Sprintf("token %d", token), rn)
				rl := okRel()
				rl.Token = token
				release(fmt.Sprintf("token %d", token), rl)
			}
			rv = okRev()
			rv.Token = -1
			revoke("token -1", rv)

			for _, c := range calls {
				for _, rt := range []*protocol.Runtime{e.a, e.b} {
					res, err := c.do(rt)
					e.expect(c.name, res, err, protocol.StatusInvalid)
					e.expectNoLease(c.name, res.Lease)
				}
			}
			e.unchanged("after invalid requests", before)
			e.expectLease("the held lease", e.get(e.b, "held"), held)
			if g := e.get(e.a, "fresh"); g != nil {
				e.t.Fatalf("get fresh after invalid acquires: %s, want not_found", fmtLease(g))
			}
			if ls := e.list(e.a, protocol.ListRequest{Namespace: e.ns, IncludeExpired: true}).Leases; len(ls) != 1 {
				e.t.Fatalf("list after invalid requests: %q, want only held", names(ls))
			}
			recs := e.auditAll(audit.Query{})
			if len(recs) != 1 || recs[0].Key != "held" {
				e.t.Fatalf("audit after invalid requests: %+v, want the one acquire", recs)
			}
		}},
		{"list", func(e *env) {
			e.acquire(e.a, "held", "w1", leaseTTL)
			reqs := map[string]protocol.ListRequest{
				"bad cursor":             {Namespace: e.ns, Cursor: "bogus"},
				"cursor bad base64":      {Namespace: e.ns, Cursor: "c1.!!!"},
				"audit cursor":           {Namespace: e.ns, Cursor: audit.EncodeCursor(1)},
				"cursor of a bad name":   {Namespace: e.ns, Cursor: backendkit.EncodeListCursor("a\x00b")},
				"limit too big":          {Namespace: e.ns, Limit: protocol.MaxListLimit + 1},
				"negative limit":         {Namespace: e.ns, Limit: -1},
				"empty namespace":        {},
				"too long namespace":     {Namespace: strings.Repeat("n", protocol.MaxNamespaceLen+1)},
				"prefix control char":    {Namespace: e.ns, Prefix: "h\x00"},
				"prefix bad utf8":        {Namespace: e.ns, Prefix: "h\xff"},
				"owner control char":     {Namespace: e.ns, Owner: "w\n1"},
				"namespace control char": {Namespace: "con\ttract"},
			}
			for what, req := range reqs {
				for _, rt := range []*protocol.Runtime{e.a, e.b} {
					res, err := rt.List(e.ctx, req)
					if res.Status != protocol.StatusInvalid || len(res.Leases) != 0 || res.NextCursor != "" {
						e.t.Fatalf("list %s: status %q, %d leases, cursor %q; want invalid and nothing", what, res.Status, len(res.Leases), res.NextCursor)
					}
					e.checkErr("list "+what, err, protocol.StatusInvalid, nil)
				}
			}
		}},
	}...)
}
