package etcd

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/protocol"
)

// errRevisionBack: the cluster answered with a revision below one it
// answered before, or a change at a revision not above it (a change
// commits at a revision above every one answered before it was sent).
// Fencing tokens are revisions, so such a cluster (a snapshot restored
// without --bump-revision, a quorum of members that lost acknowledged
// writes, or another cluster at the same addresses) would issue tokens
// already issued. It matches protocol.ErrRestartRequired: the process
// refuses every operation until it restarts.
type errRevisionBack struct {
	was, now int64
	change   bool // the answer was a change's, at now, not above was
}

func (e *errRevisionBack) Error() string {
	if e.change {
		return fmt.Sprintf("the cluster's revision went back: it answered a change at revision %d, not above the revision %d it answered before", e.now, e.was)
	}
	return fmt.Sprintf("the cluster's revision went back from %d to %d", e.was, e.now)
}

func (e *errRevisionBack) Unwrap() error { return protocol.ErrRestartRequired }

// errRevisionBehind: the store's revision mark (P/rev) is at or above the
// revision of the cluster that answered with it. Each change's transaction
// raises the mark to a revision its process had seen (or the token it
// changed), which is below the transaction's own revision, so on the
// cluster that wrote it the mark is always below the cluster's revision.
// A mark at or above it means the store's keys were copied into another
// cluster (etcdctl make-mirror, get and put), whose revision, and so its
// next tokens, lie below tokens the store issued; or that the cluster
// lost acknowledged writes and a process that had seen them wrote since
// (its write committed before the guard refused its answer).
type errRevisionBehind struct{ mark, rev int64 }

func (e *errRevisionBehind) Error() string {
	return fmt.Sprintf("the store's revision mark is %d, not below the cluster's revision %d", e.mark, e.rev)
}

// markOps returns the write that raises the store's revision mark to the
// highest revision this process has seen, or token when that is greater
// (the token of the lease a renew, release or revoke changes): a nested
// transaction that puts the mark unless it is already at least that high
// (a value compare fails on a missing key, so a missing mark is put).
// The revision a change commits at is above both, so the mark stays below
// the revision of every later answer of the same cluster. Nothing when
// nothing was seen yet.
func (b *Backend) markOps(token int64) []clientv3.Op {
	v := max(b.kv.guard.highest(), token)
	if v <= 0 {
		return nil
	}
	mark := b.keys.revMark()
	return []clientv3.Op{clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(mark), ">", markValue(v-1))},
		nil,
		[]clientv3.Op{clientv3.OpPut(mark, markValue(v))})}
}

// markValue encodes a revision mark: fixed-width decimal, so that etcd's
// byte-wise compare orders marks.
func markValue(rev int64) string { return fmt.Sprintf("%0*d", expiryLen, rev) }

// checkMark refuses the store when its revision mark (kvs, the answer to a
// get of it; none for a store no change of this release wrote) is at or
// above rev, the revision of the same answer.
func (b *Backend) checkMark(op protocol.Op, kvs []*mvccpb.KeyValue, rev int64) error {
	if len(kvs) == 0 {
		return nil
	}
	mark, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil || len(kvs[0].Value) != expiryLen {
		return errInternal(op, "%s: the revision mark %s holds %q, not a revision: it is leasestore's own entry; delete it only to stop this check",
			b.shown, kvs[0].Key, kvs[0].Value)
	}
	if mark >= rev {
		return b.interpret(context.Background(), op, &errRevisionBehind{mark: mark, rev: rev})
	}
	return nil
}

// revisionGuard remembers the highest revision the cluster's answers
// carried and, once an answer carries a revision below one answered
// before its request was sent (or, for a transaction that changed
// something, not above it), refuses every later call: the Backend then
// writes nothing more until the process restarts. Reads are linearizable
// (this package never reads serializable through it), so while the
// cluster is the same a read's revision is never below that of an answer
// received before its request left, and a change's, the revision it
// committed at, is above it; answers to concurrent calls may arrive in
// any order, and are compared only with what preceded them. Safe for
// concurrent use.
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

// highest returns the highest revision answered so far.
func (g *revisionGuard) highest() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen
}

// observe notes the header of the answer to a call that began when the
// highest revision answered was before, and that changed something
// (wrote) or not; it returns an error when the revision went back (then
// and on every later call): a read answered below before, or a change
// answered at or below it.
func (g *revisionGuard) observe(before int64, h *pb.ResponseHeader, wrote bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.back != nil:
		return g.back
	case h == nil:
		return nil
	case h.Revision < before, wrote && h.Revision == before:
		g.back = &errRevisionBack{was: before, now: h.Revision, change: wrote}
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
	if err := k.guard.observe(before, resp.Header, false); err != nil {
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
	if err := t.guard.observe(before, resp.Header, changed(resp.Responses)); err != nil {
		return nil, err
	}
	return resp, nil
}

// changed reports whether the answers of a transaction's branch (nested
// transactions' included) show that it changed something: a put, or a
// delete that found a key. etcd raises its revision for those alone, so
// a transaction that took a read-only branch answers at the revision it
// read.
func changed(rs []*pb.ResponseOp) bool {
	for _, r := range rs {
		switch x := r.Response.(type) {
		case *pb.ResponseOp_ResponsePut:
			return true
		case *pb.ResponseOp_ResponseDeleteRange:
			if x.ResponseDeleteRange.Deleted > 0 {
				return true
			}
		case *pb.ResponseOp_ResponseTxn:
			if changed(x.ResponseTxn.Responses) {
				return true
			}
		}
	}
	return false
}
