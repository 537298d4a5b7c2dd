package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// scanPage is how many entries one range of a scan reads.
const scanPage = 600

// scan calls fn with the state of each key whose entries lie in
// [start, end), in key order, read at one revision (that of the first
// range, or rev when non-zero), until fn returns false or the range ends.
func (b *Backend) scan(ctx context.Context, op protocol.Op, start, end string, rev int64,
	fn func(k protocol.Key, st keyState) bool) error {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(scanPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := b.kv.Get(ctx, start, opts...)
		if err != nil {
			return b.interpret(ctx, op, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs := resp.Kvs
		if len(kvs) == 0 {
			return nil
		}
		// Group the entries by key, skipping keys of other clients. While
		// more follow, the last key's entries may go on in the next range
		// (foreign keys can fill a range around one key's entries): when
		// other keys precede it, the next range starts again from its
		// first entry; when it is the range's only key, its four entries
		// are read by name (entries), so fn always sees a key whole, and
		// the next range starts past its prefix.
		var groups [][]*mvccpb.KeyValue
		var keys []protocol.Key
		for _, kv := range kvs {
			k, _, ok := b.keys.parseLeaseKey(string(kv.Key))
			if !ok {
				continue
			}
			if n := len(keys); n > 0 && keys[n-1] == k {
				groups[n-1] = append(groups[n-1], kv)
				continue
			}
			keys, groups = append(keys, k), append(groups, []*mvccpb.KeyValue{kv})
		}
		switch {
		case resp.More && len(keys) > 1:
			start = string(groups[len(groups)-1][0].Key)
			keys, groups = keys[:len(keys)-1], groups[:len(groups)-1]
		case resp.More && len(keys) == 1:
			whole, err := b.entries(ctx, op, keys[0], rev)
			if err != nil {
				return err
			}
			groups[0] = whole
			start = clientv3.GetPrefixRangeEnd(b.keys.lease(keys[0]))
		default:
			start = string(kvs[len(kvs)-1].Key) + "\x00"
		}
		for i, k := range keys {
			if !fn(k, b.stateOf(groups[i])) {
				return nil
			}
		}
		if !resp.More {
			return nil
		}
	}
}

// entries reads k's entries at rev by their names, in one transaction
// (entryGets).
func (b *Backend) entries(ctx context.Context, op protocol.Op, k protocol.Key, rev int64) ([]*mvccpb.KeyValue, error) {
	resp, err := b.kv.Txn(ctx).Then(b.entryGets(k, clientv3.WithRev(rev))...).Commit()
	if err != nil {
		return nil, b.interpret(ctx, op, err)
	}
	return entriesIn(resp.Responses), nil
}

// compactedRestarts bounds how often a read of several ranges starts
// again when its revision was compacted between them (atOneRevision).
const compactedRestarts = 3

// atOneRevision runs read, which reads several ranges at one revision
// (that of its first read), and runs it again from its start, at a newer
// revision, when the cluster compacted that revision between its ranges
// (auto-compaction on a busy cluster), up to compactedRestarts times
// more: each call answers as of one revision, and any recent one will
// do. read starts from nothing each time; a caller's cursor stays where
// it was.
func atOneRevision(read func() error) error {
	for restarts := 0; ; restarts++ {
		err := read()
		if restarts == compactedRestarts || !errors.Is(err, rpctypes.ErrCompacted) {
			return err
		}
	}
}

// atOneRevisionOf is atOneRevision for a read that answers a value and
// the revision it read at: it returns those of its last run.
func atOneRevisionOf[T any](read func() (T, int64, error)) (v T, rev int64, err error) {
	err = atOneRevision(func() (err error) {
		v, rev, err = read()
		return err
	})
	return v, rev, err
}

// List returns one page of the namespace's leases ordered by name (etcd
// orders keys byte by byte), read at one revision.
func (b *Backend) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseList(req); err != nil {
		return res, err
	}
	if err := b.open(protocol.OpList); err != nil {
		return protocol.ListResult{}, err
	}
	after, limit, err := backendkit.ListStart(req)
	if err != nil {
		return protocol.ListResult{}, err
	}
	ns := b.keys.namespace(req.Namespace)
	start := ns + req.Prefix
	if req.Cursor != "" && ns+after+"\x01" > start {
		start = ns + after + "\x01"
	}
	end := clientv3.GetPrefixRangeEnd(ns + req.Prefix)
	var rows []protocol.Lease
	var ferr error
	err = atOneRevision(func() error {
		in := b.instant()
		rows = nil
		return b.scan(ctx, protocol.OpList, start, end, 0, func(k protocol.Key, st keyState) bool {
			cur, live, err := b.leaseOf(protocol.OpList, k, st, in)
			if err != nil {
				ferr = err
				return false
			}
			if cur == nil || (req.Owner != "" && cur.Owner != req.Owner) || (!req.IncludeExpired && !live) {
				return true
			}
			rows = append(rows, *cur)
			return len(rows) <= limit
		})
	})
	if err != nil {
		return protocol.ListResult{}, err
	}
	if ferr != nil {
		return protocol.ListResult{}, ferr
	}
	return backendkit.LeasePage(rows, limit), nil
}

// Namespaces returns up to limit namespaces that hold a live lease, in
// byte order, after after (see [protocol.NamespaceLister]). It skips from
// namespace to namespace, reading each only until its first live lease.
func (b *Backend) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if err := backendkit.RefuseNamespaces(after, limit); err != nil {
		return nil, err
	}
	if err := b.open(protocol.OpNamespaces); err != nil {
		return nil, err
	}
	all := b.keys.leases()
	end := clientv3.GetPrefixRangeEnd(all)
	first := all
	if after != "" {
		first = all + after + "\x01"
	}
	out, _, err := atOneRevisionOf(func() ([]string, int64, error) { return b.namespaces(ctx, first, end, limit) })
	return out, err
}

// namespaces is one read of Namespaces from start, at one revision, which
// it returns.
func (b *Backend) namespaces(ctx context.Context, start, end string, limit int) ([]string, int64, error) {
	all := b.keys.leases()
	in := b.instant()
	var out []string
	var rev int64
	for len(out) < limit {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := b.kv.Get(ctx, start, opts...)
		if err != nil {
			return nil, 0, b.interpret(ctx, protocol.OpNamespaces, err)
		}
		rev = resp.Header.Revision
		if len(resp.Kvs) == 0 {
			break
		}
		ns, _, ok := strings.Cut(strings.TrimPrefix(string(resp.Kvs[0].Key), all), sep)
		if !ok {
			start = string(resp.Kvs[0].Key) + "\x00"
			continue
		}
		found := false
		err = b.scan(ctx, protocol.OpNamespaces, b.keys.namespace(ns), clientv3.GetPrefixRangeEnd(b.keys.namespace(ns)), rev,
			func(_ protocol.Key, st keyState) bool {
				found = st.o != nil && in.live(st.e)
				return !found
			})
		if err != nil {
			return nil, 0, err
		}
		if found {
			out = append(out, ns)
		}
		start = all + ns + "\x01"
	}
	return out, rev, nil
}

// Sweep removes the entries of up to max leases that expired more than
// grace ago by this process's clock (and whose liveness entry the cluster
// removed), each in a transaction that compares every entry with the state
// read, so a lease renewed or acquired meanwhile stays, and the store's
// format record (storeCmp: a store destroyed meanwhile fails matching
// [ErrNoStore]). Released and
// revoked leases leave no entries, so only expired ones are swept.
// Fencing holds across a sweep: the next acquire's token is its own
// revision.
func (b *Backend) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if err := b.open(protocol.OpSweep); err != nil {
		return protocol.SweepResult{}, err
	}
	if max <= 0 {
		return protocol.SweepResult{}, nil // see protocol.Sweeper
	}
	if grace < 0 {
		grace = 0
	}
	type victim struct {
		k  protocol.Key
		st keyState
	}
	var victims []victim
	all := b.keys.leases()
	err := atOneRevision(func() error {
		in := b.instant()
		victims = nil
		return b.scan(ctx, protocol.OpSweep, all, clientv3.GetPrefixRangeEnd(all), 0, func(k protocol.Key, st keyState) bool {
			cur, live, err := b.leaseOf(protocol.OpSweep, k, st, in)
			if err != nil || cur == nil || live || in.delaying(st.d) || !cur.ExpiresAt.Add(grace).Before(in.now) {
				return true // a lease under its lock-delay stays: the conflict shows it
			}
			victims = append(victims, victim{k, st})
			return len(victims) < max
		})
	})
	if err != nil {
		return protocol.SweepResult{}, err
	}
	var res protocol.SweepResult
	for _, v := range victims {
		base := b.keys.lease(v.k)
		var eRev int64
		if v.st.e != nil {
			eRev = v.st.e.ModRevision
		}
		resp, err := b.kv.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(base+suffixO[1:]), "=", v.st.o.ModRevision),
			clientv3.Compare(clientv3.ModRevision(base+suffixR[1:]), "=", v.st.r.ModRevision),
			clientv3.Compare(clientv3.ModRevision(base+suffixE[1:]), "=", eRev),
			b.storeCmp(),
		).Then(clientv3.OpDelete(base+suffixO[1:]), clientv3.OpDelete(base+suffixR[1:]), clientv3.OpDelete(base+suffixE[1:])).
			Else(b.storeGet()).Commit()
		if err != nil {
			return res, b.interpret(ctx, protocol.OpSweep, err)
		}
		if !resp.Succeeded && storeGone(resp.Responses[0]) {
			return res, b.interpret(ctx, protocol.OpSweep, ErrNoStore)
		}
		if resp.Succeeded {
			res.Removed++
			b.cache.put(v.k, keyState{})
		}
	}
	return res, nil
}
