package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestNestedPrefixRefused: a store whose prefix lies in another store's
// lease or audit entries (PREFIX/k/... or PREFIX/a/...) is refused at open
// (invalid, naming both prefixes): its entries would be read as the outer
// store's, which then listed a namespace "k/ns" of the inner one's keys,
// failed every audit read on an inner store's entry ("audit record ... is
// malformed"), and deleted the inner stores with its own at migrate down.
// A prefix beside the outer store's, or below it elsewhere, is fine.
func TestNestedPrefixRefused(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	outer := open(t, &etcd.Config{Prefix: c.Prefix(t)})
	for _, inner := range []string{outer.Prefix() + "k", outer.Prefix() + "a/team/", outer.Prefix() + "k/x/a/y"} {
		b, err := etcd.Open(t.Context(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: inner})
		if err == nil {
			_ = b.Close(context.Background())
			t.Errorf("open under %s accepted inside the store under %s", inner, outer.Prefix())
			continue
		}
		if !errors.Is(err, protocol.ErrInvalid) || !contains(err, outer.Prefix()) {
			t.Errorf("open under %s: %v; want invalid naming %s", inner, err, outer.Prefix())
		}
	}
	for _, fine := range []string{outer.Prefix() + "kk", outer.Prefix() + "team/k", strings.TrimSuffix(outer.Prefix(), "/") + "-k/"} {
		open(t, &etcd.Config{Prefix: fine})
	}
}

// TestDestroyKeepsNestedStore: destroying a store (`leasectl migrate down
// --destroy-data`) deletes its own entries (meta, leases, trail) and
// leaves a store whose prefix lies below it elsewhere (which opening
// allows: TestNestedPrefixRefused), with its live lease and its trail.
func TestDestroyKeepsNestedStore(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	outer := open(t, &etcd.Config{Prefix: c.Prefix(t)})
	inner := open(t, &etcd.Config{Prefix: outer.Prefix() + "team/"})
	held, err := protocol.New(inner, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.New(outer, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := outer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := outer.Format(ctx); err != nil || n != 0 {
		t.Fatalf("format of the destroyed store: %d %v, want 0", n, err)
	}
	if l, r, err := outer.Counts(ctx); err != nil || l != 0 || r != 0 {
		t.Fatalf("the destroyed store counts %d leases, %d records (%v)", l, r, err)
	}
	if err := inner.Health(ctx); err != nil {
		t.Fatalf("health of the store under %s after the store above was destroyed: %v", inner.Prefix(), err)
	}
	got, err := inner.Get(ctx, protocol.GetRequest{Key: key("k")})
	if err != nil || got.Lease == nil || got.Lease.Token != held.Lease.Token {
		t.Fatalf("get of the nested store's lease: %v %+v %v, want token %d", got.Status, got.Lease, err, held.Lease.Token)
	}
	if page, err := inner.ReadAudit(ctx, audit.Query{Namespace: "ns"}); err != nil || len(page.Records) != 1 {
		t.Fatalf("the nested store's trail: %v %v, want its acquire's record", page.Records, err)
	}
}

// TestPrefixFormsOpenOneStore: a prefix names one store however its
// slashes are written: Config.Prefix "P", "/P", "P/" and "//P//" open the
// store that the DSN etcd://HOST/P/ opens ("/P/"), as a user of both
// expects. Before, Config.Prefix "P" opened the store "P/", which a DSN
// cannot name: a lease acquired through one was not seen through the other.
func TestPrefixFormsOpenOneStore(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	p := strings.Trim(c.Prefix(t), "/")
	cfg, err := etcd.ParseDSN(c.DSN(p) + "/")
	if err != nil {
		t.Fatal(err)
	}
	viaDSN := open(t, cfg)
	ctx := t.Context()
	held, err := protocol.New(viaDSN, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{p, "/" + p, p + "/", "//" + p + "//"} {
		b := open(t, &etcd.Config{Prefix: form})
		if b.Prefix() != viaDSN.Prefix() {
			t.Errorf("Config.Prefix %q: the store's prefix is %q, want the DSN's %q", form, b.Prefix(), viaDSN.Prefix())
		}
		got, err := b.Get(ctx, protocol.GetRequest{Key: key("k")})
		if err != nil || got.Lease == nil || got.Lease.Token != held.Lease.Token {
			t.Errorf("Config.Prefix %q: get of the lease acquired through the DSN %s: %v %v, want token %d",
				form, c.DSN(p)+"/", got.Status, err, held.Lease.Token)
		}
	}
}
