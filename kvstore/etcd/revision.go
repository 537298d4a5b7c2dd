package etcd

import (
	"context"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errRevisionBack: the cluster answered with a revision below one it
// answered before. Fencing tokens are revisions, so such a cluster (a
// snapshot restored without --bump-revision, or another cluster at the
// same addresses) would issue tokens already issued.
type errRevisionBack struct{ was, now int64 }

func (e *errRevisionBack) Error() string {
	return fmt.Sprintf("the cluster's revision went back from %d to %d", e.was, e.now)
}

// revisionGuard remembers the highest revision the cluster's answers
// carried and, once an answer carries a revision below one answered
// before its request was sent, refuses every later call: the Backend then
// writes nothing more until the process restarts. Reads are linearizable
// (this package never reads serializable through it), so while the
// cluster is the same an answer's revision is never below that of an
// answer received before its request left; answers to concurrent calls
// may arrive in any order, and are compared only with what preceded them.
// Safe for concurrent use.
type revisionGuard struct {
	mu   sync.Mutex
	seen int64
	back *errRevisionBack // sticky once set
}

// begin returns the highest revision answered so far, for the call about
// to be sent, or the error of a guard that saw the revision go back.
func (g *revisionGuard) begin() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.back != nil {
		return 0, g.back
	}
	return g.seen, nil
}

// observe notes the header of the answer to a call that began when the
// highest revision answered was before; it returns an error when the
// revision went back (then and on every later call).
func (g *revisionGuard) observe(before int64, h *pb.ResponseHeader) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.back != nil:
		return g.back
	case h == nil:
		return nil
	case h.Revision < before:
		g.back = &errRevisionBack{was: before, now: h.Revision}
		return g.back
	}
	g.seen = max(g.seen, h.Revision)
	return nil
}

// guardedKV is the KV every operation of the Backend goes through: Get
// and Txn pass each answer's revision to the guard, and are refused
// unsent once it went back.
type guardedKV struct {
	clientv3.KV
	guard *revisionGuard
}

func (k guardedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	before, err := k.guard.begin()
	if err != nil {
		return nil, err
	}
	resp, err := k.KV.Get(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	if err := k.guard.observe(before, resp.Header); err != nil {
		return nil, err
	}
	return resp, nil
}

func (k guardedKV) Txn(ctx context.Context) clientv3.Txn {
	return guardedTxn{Txn: k.KV.Txn(ctx), guard: k.guard}
}

type guardedTxn struct {
	clientv3.Txn
	guard *revisionGuard
}

func (t guardedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return guardedTxn{Txn: t.Txn.If(cs...), guard: t.guard}
}

func (t guardedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return guardedTxn{Txn: t.Txn.Then(ops...), guard: t.guard}
}

func (t guardedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return guardedTxn{Txn: t.Txn.Else(ops...), guard: t.guard}
}

func (t guardedTxn) Commit() (*clientv3.TxnResponse, error) {
	before, err := t.guard.begin()
	if err != nil {
		return nil, err
	}
	resp, err := t.Txn.Commit()
	if err != nil {
		return nil, err
	}
	if err := t.guard.observe(before, resp.Header); err != nil {
		return nil, err
	}
	return resp, nil
}
