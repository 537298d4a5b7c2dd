package contract

import (
	"strings"

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
			for _, c := range e.invalidRequests(held) {
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
