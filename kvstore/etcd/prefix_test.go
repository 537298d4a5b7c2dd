package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

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

// TestStoreAboveExistingStoreRefused: creating a store whose lease or
// audit entries would hold an existing store (one under PREFIX/k/... or
// PREFIX/a/..., opened first) is refused (invalid, naming the key found
// there) and writes no format record: the store above would read the
// one below as its own (a namespace "k/ns" in its list, an acquire of it
// taking the other store's lease entries), and the store below could no
// longer be opened (TestNestedPrefixRefused), as two leasectl processes
// on the two prefixes found.
func TestStoreAboveExistingStoreRefused(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	ctx := t.Context()
	for _, below := range []string{"k", "a/team/", "k/x/a/y"} {
		outer := c.Prefix(t)
		inner := open(t, &etcd.Config{Prefix: outer + below})
		if _, err := protocol.New(inner, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		b, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: outer})
		if err == nil {
			_ = b.Close(context.Background())
			t.Errorf("a store under %s was created above the store under %s", outer, inner.Prefix())
		} else if !errors.Is(err, protocol.ErrInvalid) || !contains(err, inner.Prefix()) {
			t.Errorf("open under %s above the store under %s: %v; want invalid naming a key under %s", outer, inner.Prefix(), err, inner.Prefix())
		}
		meta, err := inner.Client().Get(ctx, outer+"meta", clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if meta.Count != 0 {
			t.Errorf("the open under %s wrote its format record %s; want none written", outer, outer+"meta")
		}
		again, err := etcd.Open(ctx, &etcd.Config{Endpoints: c.Endpoints(), Prefix: outer + below})
		if err != nil {
			t.Errorf("reopen the store under %s after the open above it: %v", inner.Prefix(), err)
			continue
		}
		_ = again.Close(context.Background())
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

// TestDestroyKeepsOtherKeys: destroying a store (`leasectl migrate down
// --destroy-data`) deletes its own entries only: keys another client put
// under PREFIX/k/ and PREFIX/a/ that are no entry of the store (an
// operator's notes, one among a lease's entries, one among the trail's)
// stay, as docs/etcd.md says other keys under the prefix do. A lease
// acquired through another handle just before Destroy's deletion is sent,
// sorting after the notes, goes too: nothing of the store is left.
func TestDestroyKeepsOtherKeys(t *testing.T) {
	t.Parallel()
	prefix := etcdcluster.Shared(t).Prefix(t)
	other := open(t, &etcd.Config{Prefix: prefix})
	ctx := t.Context()
	var armed atomic.Bool
	lateErr := errors.New("no deletion was sent")
	late := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) && armed.CompareAndSwap(true, false) {
			_, lateErr = other.Acquire(ctx, protocol.AcquireRequest{Key: key("zz"), Owner: "o", TTL: time.Minute, RequestID: "late"})
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	b := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: prefix}, late))
	rt := protocol.New(b, nil)
	for _, name := range []string{"k", "m"} {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	p := b.Prefix()
	notes := []string{p + "a/notes", p + "a/ns-notes", p + "k/notes", p + "k/ns\x00k\x00note"}
	for _, k := range notes {
		if _, err := b.Client().Put(ctx, k, "not leasestore's"); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	if _, err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if lateErr != nil {
		t.Fatalf("the acquire made while Destroy was under way: %v; nothing tested", lateErr)
	}
	left, err := b.Client().Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range left.Kvs {
		got = append(got, string(kv.Key))
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", notes) {
		t.Fatalf("after Destroy the store's prefix holds %q; want only the other keys %q", got, notes)
	}
}

// TestDestroyAmongManyOtherKeys: when other keys lie among the store's
// entries in more places than one transaction's ranges can go around
// (a note among the entries of each of 120 leases), Destroy deletes the
// entries in several transactions, and still only them, the count it
// reports included.
func TestDestroyAmongManyOtherKeys(t *testing.T) {
	t.Parallel()
	var txns atomic.Int64
	countTxns := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && deletes(txn) {
			txns.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	b := open(t, etcd.WithDialOptions(&etcd.Config{Prefix: etcdcluster.Shared(t).Prefix(t)}, countTxns))
	rt := protocol.New(b, nil)
	ctx := t.Context()
	p := b.Prefix()
	var notes []string
	for i := range 120 {
		name := fmt.Sprintf("k%03d", i)
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		note := p + "k/ns\x00" + name + "\x00note"
		if _, err := b.Client().Put(ctx, note, "not leasestore's"); err != nil {
			t.Fatal(err)
		}
		notes = append(notes, note)
	}
	all, err := b.Client().Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	txns.Store(0)
	n, err := b.Destroy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if txns.Load() < 2 {
		t.Errorf("Destroy deleted in %d transactions; want several (nothing tested)", txns.Load())
	}
	left, err := b.Client().Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range left.Kvs {
		got = append(got, string(kv.Key))
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", notes) {
		t.Fatalf("after Destroy the store's prefix holds %d keys, the first %q; want only the %d other keys", len(got), got[:min(len(got), 3)], len(notes))
	}
	if want := all.Count - int64(len(notes)); n != want {
		t.Errorf("Destroy reported %d keys deleted; want %d", n, want)
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

// TestRoleOnThePrefixOpensAStoreBelowASegmentKOrA: a user whose role may
// read and write exactly the store's prefix (what docs/etcd.md tells
// operators to create), or only read it (an auditor), opens a store whose
// prefix has a segment "k" or "a" (/apps/a/svc/, /k/svc/) and uses it.
// Before, Open read the format record of the store that would lie one
// level up (/apps/meta, /meta), which the role may not read, and failed
// unavailable blaming the user's permission on the prefix. A store above
// whose format record the user may read is still refused, also when
// another one above is beyond the user's reach. (A one-member cluster of
// the test's own, with authentication on.)
func TestRoleOnThePrefixOpensAStoreBelowASegmentKOrA(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := authCluster(t, "rootpw")
	root := rootClient(t, host, "rootpw")
	as := func(name, prefix string) *etcd.Config {
		return &etcd.Config{Endpoints: []string{host}, Prefix: prefix, Username: name, Password: name + "pw"}
	}
	for i, prefix := range []string{"/apps/a/svc/", "/k/svc/"} {
		writer, reader := fmt.Sprint("writer", i), fmt.Sprint("reader", i)
		addUser(t, root, writer, clientv3.PermissionType(clientv3.PermReadWrite), prefix)
		addUser(t, root, reader, clientv3.PermissionType(clientv3.PermRead), prefix)
		b := openAt(t, as(writer, prefix))
		if _, err := protocol.New(b, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
			t.Errorf("acquire under %s by a user that may read and write it: %v", prefix, err)
		}
		readable(t, as(reader, prefix), "a user that may only read "+prefix)
	}

	// A store at /q/a/x/ (root's), and a user that may read its format
	// record but not /q/meta: its store at /q/a/x/k/y/ lies in /q/a/x/'s
	// lease entries, which the user can see.
	openAt(t, &etcd.Config{Endpoints: []string{host}, Prefix: "/q/a/x/", Username: "root", Password: "rootpw"})
	addUser(t, root, "inside", clientv3.PermissionType(clientv3.PermReadWrite), "/q/a/x/k/y/", "/q/a/x/meta")
	if b, err := etcd.Open(ctx, as("inside", "/q/a/x/k/y/")); err == nil {
		_ = b.Close(context.Background())
		t.Errorf("open under /q/a/x/k/y/, inside the store under /q/a/x/ whose format record the user may read, accepted")
	} else if !errors.Is(err, protocol.ErrInvalid) || !contains(err, "/q/a/x/") {
		t.Errorf("open under /q/a/x/k/y/: %v; want invalid naming /q/a/x/", err)
	}
}
