package etcd_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestKeysWhoseNamesExtendAnother: a key's entries lie under
// P/k/NS\0NAME\0, and neither a name nor a namespace holds a NUL, so the
// entries of `a` sort together before those of `a b`, `a/...` and `ab`
// and never share a prefix with them. Get, list (across the scan's
// ranges of 600 entries, one of which ends inside a key's entries here),
// Counts and the audit trail of key `a` hold `a`'s alone; the same for a
// namespace whose name extends another's (`x` and `x/y`).
func TestKeysWhoseNamesExtendAnother(t *testing.T) {
	t.Parallel()
	b := open(t, &etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)})
	rt := protocol.New(b, nil)
	ctx := t.Context()
	names := []string{"a", "a b"}
	for i := range 250 {
		names = append(names, fmt.Sprintf("a/%03d", i))
	}
	names = append(names, "a/b", "a/b/c", "ab")
	tokens, owners := map[protocol.Key]int64{}, map[protocol.Key]string{}
	for i, n := range names {
		req := protocol.AcquireRequest{Key: key(n), Owner: n, TTL: time.Minute}
		if i%2 == 0 {
			req.LockDelay = time.Minute // four entries: the ranges end inside a key
		}
		res, err := rt.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		tokens[req.Key], owners[req.Key] = res.Lease.Token, n
	}
	for _, k := range []protocol.Key{{Namespace: "x", Name: "y/z"}, {Namespace: "x/y", Name: "z"}} {
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: k.String(), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		tokens[k], owners[k] = res.Lease.Token, k.String()
	}
	check := func(what string, got []protocol.Lease, want []string) {
		t.Helper()
		var gotNames []string
		for _, l := range got {
			gotNames = append(gotNames, l.Key.Name)
			if l.Owner != owners[l.Key] || l.Token != tokens[l.Key] {
				t.Fatalf("%s: key %s carries owner %q token %d; want its own, %q token %d", what, l.Key, l.Owner, l.Token, owners[l.Key], tokens[l.Key])
			}
		}
		if !slices.Equal(gotNames, want) {
			t.Fatalf("%s: names %q; want %q", what, gotNames, want)
		}
	}
	for _, n := range []string{"a", "a/b", "ab", "a b"} {
		res, err := rt.Get(ctx, protocol.GetRequest{Key: key(n)})
		if err != nil {
			t.Fatal(err)
		}
		check("get "+n, []protocol.Lease{*res.Lease}, []string{n})
	}
	page, err := rt.List(ctx, protocol.ListRequest{Namespace: "ns", Prefix: "a", Limit: protocol.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	check("list prefix a", page.Leases, names)
	page, err = rt.List(ctx, protocol.ListRequest{Namespace: "ns", Prefix: "a/b", Limit: protocol.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	check("list prefix a/b", page.Leases, []string{"a/b", "a/b/c"})
	// Pages of 7 across the split ranges: every key once, in order.
	var paged []protocol.Lease
	for cursor := ""; ; {
		page, err := rt.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, page.Leases...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	check("list by pages of 7", paged, names)
	for _, ns := range []string{"x", "x/y"} {
		page, err := rt.List(ctx, protocol.ListRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"x": "y/z", "x/y": "z"}[ns]
		check("list namespace "+ns, page.Leases, []string{want})
	}
	if leases, _, err := b.Counts(ctx); err != nil || leases != int64(len(names)+2) {
		t.Fatalf("counts %d leases (%v); want %d", leases, err, len(names)+2)
	}
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key("a"), Owner: "a", Token: tokens[key("a")]}); err != nil {
		t.Fatal(err)
	}
	if res, err := rt.Get(ctx, protocol.GetRequest{Key: key("a")}); res.Status != protocol.StatusNotFound {
		t.Fatalf("get a after its release: %v %v; want not_found", res.Status, err)
	}
	for _, n := range []string{"a b", "a/b", "ab"} {
		res, err := rt.Get(ctx, protocol.GetRequest{Key: key(n)})
		if err != nil {
			t.Fatalf("get %s after the release of a: %v", n, err)
		}
		check("get "+n+" after the release of a", []protocol.Lease{*res.Lease}, []string{n})
	}
	trail, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(trail.Records) != 2 || trail.Records[0].Op != protocol.OpAcquire || trail.Records[1].Op != protocol.OpRelease {
		t.Fatalf("audit of key a: %+v; want its acquire and release", trail.Records)
	}
	for _, r := range trail.Records {
		if r.Key != "a" || r.Owner != "a" || r.Token != tokens[key("a")] {
			t.Fatalf("audit of key a holds %+v", r)
		}
	}
}
