package contract

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// expectNames checks the names of a page against want, in order.
func (e *env) expectNames(what string, got []protocol.Lease, want ...string) {
	e.t.Helper()
	if g := names(got); !slices.Equal(g, want) {
		e.t.Fatalf("%s: names %q, want %q", what, g, want)
	}
}

func listCases() []testCase {
	return []testCase{
		{"empty", func(e *env) {
			res := e.list(e.a, protocol.ListRequest{Namespace: e.ns, IncludeExpired: true})
			if len(res.Leases) != 0 || res.NextCursor != "" {
				e.t.Fatalf("list of an empty namespace: %d leases, cursor %q", len(res.Leases), res.NextCursor)
			}
		}},
		{"filters", func(e *env) {
			expired := e.acquire(e.a, "job/3", "w1", time.Second)
			e.clock.Advance(time.Second)
			j1 := e.acquire(e.a, "job/1", "w1", leaseTTL)
			j2 := e.acquire(e.b, "job/2", "w2", leaseTTL)
			other := e.acquire(e.b, "other", "w1", leaseTTL)
			byName := map[string]protocol.Lease{"job/1": j1, "job/2": j2, "job/3": expired, "other": other}
			for _, c := range []struct {
				req  protocol.ListRequest
				want []string
			}{
				{protocol.ListRequest{}, []string{"job/1", "job/2", "other"}},
				{protocol.ListRequest{IncludeExpired: true}, []string{"job/1", "job/2", "job/3", "other"}},
				{protocol.ListRequest{Prefix: "job/"}, []string{"job/1", "job/2"}},
				{protocol.ListRequest{Prefix: "job/", IncludeExpired: true}, []string{"job/1", "job/2", "job/3"}},
				{protocol.ListRequest{Prefix: "job/3"}, nil},
				{protocol.ListRequest{Prefix: "jobs"}, nil},
				{protocol.ListRequest{Owner: "w1"}, []string{"job/1", "other"}},
				{protocol.ListRequest{Owner: "w1", IncludeExpired: true, Prefix: "job"}, []string{"job/1", "job/3"}},
				{protocol.ListRequest{Owner: "w2"}, []string{"job/2"}},
				{protocol.ListRequest{Owner: "w"}, nil},
				{protocol.ListRequest{Owner: "nobody"}, nil},
			} {
				c.req.Namespace = e.ns
				for _, rt := range []*protocol.Runtime{e.a, e.b} {
					res := e.list(rt, c.req)
					what := fmt.Sprintf("list %+v", c.req)
					e.expectNames(what, res.Leases, c.want...)
					if res.NextCursor != "" {
						e.t.Fatalf("%s: next cursor %q on the only page", what, res.NextCursor)
					}
					for i := range res.Leases {
						e.expectLease(what, &res.Leases[i], byName[res.Leases[i].Key.Name])
					}
				}
			}
		}},
		{"prefix_is_literal", func(e *env) {
			// LIKE's metacharacters and its escape character are plain
			// characters in a prefix.
			all := []string{`a%b`, `a\d`, `a_c`, `ab%`, `abc`, `axc`}
			for _, n := range all {
				e.acquire(e.a, n, "w1", leaseTTL)
			}
			for _, c := range []struct {
				prefix string
				want   []string
			}{
				{`a`, all},
				{`a%`, []string{`a%b`}},
				{`a_`, []string{`a_c`}},
				{`a\`, []string{`a\d`}},
				{`ab`, []string{`ab%`, `abc`}},
				{`ab%`, []string{`ab%`}},
				{`%`, nil},
				{`_`, nil},
				{`a%b`, []string{`a%b`}},
			} {
				res := e.list(e.b, protocol.ListRequest{Namespace: e.ns, Prefix: c.prefix})
				e.expectNames(fmt.Sprintf("list prefix %q", c.prefix), res.Leases, c.want...)
			}
		}},
		{"order_is_bytewise", func(e *env) {
			all := []string{"b", "B", "a", "a-b", "a.b", "aB", "ab", "Z9", "z", "é", "e", "~", "10", "9", "a b"}
			for _, n := range all {
				e.acquire(e.a, n, "w1", leaseTTL)
			}
			want := slices.Clone(all)
			slices.Sort(want) // Go compares strings byte by byte
			e.expectNames("list in one page", e.list(e.b, protocol.ListRequest{Namespace: e.ns}).Leases, want...)
			e.expectNames("list in pages of 2", e.listAll(e.a, protocol.ListRequest{Namespace: e.ns, Limit: 2}), want...)
		}},
		{"limit_and_cursor", func(e *env) {
			for i := range 5 {
				e.acquire(e.a, fmt.Sprintf("k%d", i), "w1", leaseTTL)
			}
			for _, c := range []struct {
				limit int
				pages [][]string
			}{
				{1, [][]string{{"k0"}, {"k1"}, {"k2"}, {"k3"}, {"k4"}}},
				{2, [][]string{{"k0", "k1"}, {"k2", "k3"}, {"k4"}}},
				{4, [][]string{{"k0", "k1", "k2", "k3"}, {"k4"}}},
				{5, [][]string{{"k0", "k1", "k2", "k3", "k4"}}},
				{0, [][]string{{"k0", "k1", "k2", "k3", "k4"}}}, // the default limit
				{protocol.MaxListLimit, [][]string{{"k0", "k1", "k2", "k3", "k4"}}},
			} {
				req := protocol.ListRequest{Namespace: e.ns, Limit: c.limit}
				for i, want := range c.pages {
					rt := e.a
					if i%2 == 1 {
						rt = e.b // cursors work on any handle
					}
					res := e.list(rt, req)
					what := fmt.Sprintf("limit %d page %d", c.limit, i+1)
					e.expectNames(what, res.Leases, want...)
					last := i == len(c.pages)-1
					if last != (res.NextCursor == "") {
						e.t.Fatalf("%s: next cursor %q, last page %v", what, res.NextCursor, last)
					}
					// A backend's cursor is EncodeListCursor's; a server in
					// between (httpapi) may bind it to its list, after the
					// same name.
					if name, err := backendkit.DecodeListCursor(res.NextCursor); !last && (err != nil || name != want[len(want)-1]) {
						e.t.Fatalf("%s: next cursor %q resumes after %q (%v), want after %q", what, res.NextCursor, name, err, want[len(want)-1])
					}
					req.Cursor = res.NextCursor
				}
			}
			// A cursor past the last name answers an empty last page.
			res := e.list(e.a, protocol.ListRequest{Namespace: e.ns, Cursor: backendkit.EncodeListCursor("k4")})
			if len(res.Leases) != 0 || res.NextCursor != "" {
				e.t.Fatalf("list after the last name: %q, cursor %q", names(res.Leases), res.NextCursor)
			}
		}},
		{"pagination_under_churn", func(e *env) {
			// Even names are held throughout; odd names come and go
			// between pages. Every stable name must appear exactly once,
			// in strictly ascending order, whatever happens around it.
			name := func(i int) string { return fmt.Sprintf("p%03d", i) }
			stable := map[string]bool{}
			held := map[string]protocol.Lease{}
			for i := 0; i < 40; i += 2 {
				stable[name(i)] = true
				e.acquire(e.a, name(i), "w1", leaseTTL)
			}
			for i := 1; i < 40; i += 4 {
				held[name(i)] = e.acquire(e.b, name(i), "w2", leaseTTL)
			}
			var got []string
			req := protocol.ListRequest{Namespace: e.ns, Limit: 3}
			for page := 0; ; page++ {
				if page > 100 {
					e.t.Fatal("more than 100 pages")
				}
				rt := e.a
				if page%2 == 1 {
					rt = e.b
				}
				res := e.list(rt, req)
				if len(res.Leases) > 3 {
					e.t.Fatalf("page %d: %d leases, limit 3", page, len(res.Leases))
				}
				got = append(got, names(res.Leases)...)
				if res.NextCursor == "" {
					break
				}
				req.Cursor = res.NextCursor
				// Churn: release the odd names held, acquire the others,
				// before and after the cursor.
				for j := 1 + 2*(page%2); j < 40; j += 4 {
					n := name(j)
					if l, ok := held[n]; ok {
						e.release(e.a, l)
						delete(held, n)
					} else {
						held[n] = e.acquire(e.b, n, "w3", leaseTTL)
					}
				}
			}
			seen := map[string]int{}
			for i, n := range got {
				seen[n]++
				if i > 0 && got[i-1] >= n {
					e.t.Fatalf("names not strictly ascending at %d: %q then %q (all: %q)", i, got[i-1], n, got)
				}
				var idx int
				if _, err := fmt.Sscanf(n, "p%03d", &idx); err != nil || idx < 0 || idx >= 40 {
					e.t.Fatalf("unexpected name %q", n)
				}
			}
			for n := range stable {
				if seen[n] != 1 {
					e.t.Fatalf("stable name %q appeared %d times, want 1 (all: %q)", n, seen[n], got)
				}
			}
		}},
	}
}

func namespaceCases() []testCase {
	return []testCase{
		{"isolated", func(e *env) {
			e.ns = "ns-a"
			a := e.acquire(e.a, "shared", "w1", leaseTTL)
			e.ns = "ns-b"
			b := e.acquire(e.b, "shared", "w2", leaseTTL)
			if a.Token == b.Token {
				e.t.Fatalf("two leases share token %d", a.Token)
			}
			// Each namespace answers for its own lease.
			e.expectLease("get ns-b", e.get(e.a, "shared"), b)
			e.ns = "ns-a"
			e.expectLease("get ns-a", e.get(e.b, "shared"), a)
			res, err := e.b.Acquire(e.ctx, e.acquireReq("shared", "w3", leaseTTL))
			e.expect("acquire in ns-a", res, err, protocol.StatusConflict)
			e.expectLease("conflict in ns-a", res.Lease, a)
			// ns-b's token does not fence ns-a's lease: it is judged
			// against ns-a's token only.
			want := protocol.StatusNotOwner
			if b.Token < a.Token {
				want = protocol.StatusStaleToken
			}
			res, err = e.a.Renew(e.ctx, protocol.RenewRequest{Key: a.Key, Owner: "w2", Token: b.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("renew ns-a's lease with ns-b's owner and token", res, err, want)
			e.release(e.a, a)
			e.ns = "ns-b"
			e.expectLease("get ns-b after releasing ns-a", e.get(e.b, "shared"), b)
			// List and audit answer per namespace.
			ls := e.list(e.a, protocol.ListRequest{Namespace: "ns-b", IncludeExpired: true}).Leases
			if len(ls) != 1 {
				e.t.Fatalf("list ns-b: %q, want only shared", names(ls))
			}
			e.expectLease("list ns-b", &ls[0], b)
			if ls := e.list(e.b, protocol.ListRequest{Namespace: "ns-a", IncludeExpired: true}).Leases; len(ls) != 0 {
				e.t.Fatalf("list ns-a after release: %q", names(ls))
			}
			e.expectAuditOps("ns-a", "acquire", "release")
			e.expectAuditOps("ns-b", "acquire")
			e.expectAuditOps("ns-c")
		}},
		{"listed_when_live", func(e *env) {
			nl, ok := e.h.Backend.(protocol.NamespaceLister)
			if !ok {
				e.t.Skip("the harness's backend does not implement protocol.NamespaceLister")
			}
			list := func(after string, limit int) []string {
				e.t.Helper()
				got, err := nl.Namespaces(e.ctx, after, limit)
				if err != nil {
					e.t.Fatalf("namespaces after %q: %v", after, err)
				}
				return got
			}
			for _, ns := range []string{"b", "a", "c", "dé", "d"} {
				e.ns = ns
				e.acquire(e.b, "k", "w", leaseTTL)
			}
			e.ns = "gone"
			e.release(e.a, e.acquire(e.a, "k", "w", leaseTTL))
			e.ns = "expired"
			e.acquire(e.a, "k", "w", time.Second)
			e.clock.Advance(2 * time.Second)
			if got := list("", 100); strings.Join(got, ",") != "a,b,c,d,dé" {
				e.t.Fatalf("namespaces: %q, want the ones with a live lease, bytewise", got)
			}
			if got := list("b", 2); strings.Join(got, ",") != "c,d" {
				e.t.Fatalf("namespaces after b, 2: %q, want c and d", got)
			}
			if got := list("dé", 10); len(got) != 0 {
				e.t.Fatalf("namespaces after the last: %q", got)
			}
			for _, limit := range []int{0, protocol.MaxListLimit + 1} {
				if _, err := nl.Namespaces(e.ctx, "", limit); protocol.StatusOf(err) != protocol.StatusInvalid {
					e.t.Fatalf("namespaces with limit %d: %v, want invalid", limit, err)
				}
			}
		}},
		{"request_ids_per_namespace", func(e *env) {
			// The idempotency key is (namespace, request id).
			for _, ns := range []string{"ns-a", "ns-b"} {
				e.ns = ns
				res, err := e.a.Acquire(e.ctx, protocol.AcquireRequest{Key: e.key("shared"), Owner: "w1", TTL: leaseTTL, RequestID: "same-id"})
				e.expect("acquire in "+ns, res, err, protocol.StatusAcquired)
				if res.Replayed {
					e.t.Fatalf("acquire in %s with a request id used in another namespace: replayed", ns)
				}
			}
		}},
	}
}
