package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
