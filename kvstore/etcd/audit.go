package etcd

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// auditPage is how many records one range of an audit read asks for.
const auditPage = 500

// ReadAudit returns one page of the audit trail, oldest first (by record
// id, the record's create revision: commit order) or, with q.Newest, newest
// first, filtered by q's namespace, key, since, ops and owner, read at one
// revision. A read sees every record committed before it, so a follower
// paging by cursor never skips one; q.Follow changes only the page's
// FollowCursor, past the revision read when the page is not full. From a
// cursor below the greatest id a prune removed in q's namespace (or the
// trail) it fails, matching [audit.ErrPruned] (see [audit.CheckPruned]). A
// record that fails its checksum is an error (status unavailable) naming
// it. An invalid q is invalid.
//
// etcd sorts a range by revision on the server over the whole range, so a
// page costs the server a pass over the namespace's trail (the whole trail
// without a namespace), and the key, since, ops and owner filters are
// applied here, to ranges of 500 entries: keep the trail bounded with
// audit prune.
func (b *Backend) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	page, _, err := b.readAudit(ctx, q)
	return page, err
}

// readAudit is ReadAudit that also returns the revision it read at.
func (b *Backend) readAudit(ctx context.Context, q audit.Query) (audit.Page, int64, error) {
	if err := q.Validate(); err != nil {
		return audit.Page{}, 0, backendkit.NewError(protocol.OpAudit, protocol.StatusInvalid, err, "etcd: bad audit query")
	}
	if err := b.open(protocol.OpAudit); err != nil {
		return audit.Page{}, 0, err
	}
	rows, rev, err := atOneRevisionOf(func() ([]audit.Record, int64, error) { return b.auditRows(ctx, q) })
	if err != nil {
		return audit.Page{}, 0, err
	}
	if err := audit.CheckCursorEnd(q, rev); err != nil {
		return audit.Page{}, 0, err
	}
	// A page that is not full read the trail to its end at rev: every
	// record with a smaller id, selected or not, was passed.
	return backendkit.FollowPage(rows, q, rev), rev, nil
}

// auditRows reads the records of q's page (and one more when there is a
// next page), at one revision, which it returns.
func (b *Backend) auditRows(ctx context.Context, q audit.Query) ([]audit.Record, int64, error) {
	after, before, _ := q.IDRange() // checked by Validate
	prefix := b.keys.audits()
	if q.Namespace != "" {
		prefix = b.keys.auditsOf(q.Namespace)
	}
	limit := q.EffectiveLimit()
	var (
		rows []audit.Record
		rev  int64
	)
	for len(rows) <= limit {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(auditPage)}
		if q.Newest {
			if before <= 1 {
				break // no revision below 1 (and etcd reads a maximum of 0 as none)
			}
			opts = append(opts, clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))
			if before != math.MaxInt64 {
				opts = append(opts, clientv3.WithMaxCreateRev(before-1))
			}
		} else {
			opts = append(opts, clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithMinCreateRev(after+1))
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := b.kv.Get(ctx, prefix, opts...)
		if err != nil {
			return nil, 0, b.interpret(ctx, protocol.OpAudit, err)
		}
		rev = resp.Header.Revision
		kvs, err := b.wholeRevisions(ctx, protocol.OpAudit, resp, prefix, rev)
		if err != nil {
			return nil, 0, err
		}
		for _, kv := range kvs {
			after, before = kv.CreateRevision, kv.CreateRevision
			rec, ok, err := b.auditOf(kv)
			if err != nil {
				return nil, 0, b.interpret(ctx, protocol.OpAudit, err)
			}
			if !ok || !q.Matches(rec) {
				continue
			}
			rows = append(rows, rec)
			if len(rows) > limit {
				break
			}
		}
		if !resp.More {
			break
		}
	}
	if !q.Newest && q.Cursor != "" {
		// At the page's revision: the prune batch that removed records
		// after the cursor raised the mark in the same revision.
		resp, err := b.kv.Get(ctx, b.keys.prunedThrough(q.Namespace), clientv3.WithRev(rev))
		if err != nil {
			return nil, 0, b.interpret(ctx, protocol.OpAudit, err)
		}
		var through int64
		if len(resp.Kvs) > 0 {
			if through, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return nil, 0, backendkit.NewError(protocol.OpAudit, protocol.StatusUnavailable, err,
					"%s: the prune mark %q does not parse", b.shown, resp.Kvs[0].Key)
			}
		}
		if err := audit.CheckPruned(q, through); err != nil {
			return nil, 0, err
		}
	}
	return rows, rev, nil
}

// wholeRevisions returns the entries of resp, a range of prefix's family
// sorted by create revision, that the next range may start after: the
// entries one transaction created (a prune's record and its marks) share
// a create revision, and a range that ends among them leaves the rest to
// the next one, which starts past that revision. So while more follow,
// the entries of the range's last revision are left to the next range;
// when that revision is all the range holds, they are read whole (one
// transaction's entries), at rev.
func (b *Backend) wholeRevisions(ctx context.Context, op protocol.Op, resp *clientv3.GetResponse, prefix string, rev int64) ([]*mvccpb.KeyValue, error) {
	kvs := resp.Kvs
	if !resp.More || len(kvs) == 0 {
		return kvs, nil
	}
	last := kvs[len(kvs)-1].CreateRevision
	i := len(kvs)
	for i > 0 && kvs[i-1].CreateRevision == last {
		i--
	}
	if i > 0 {
		return kvs[:i], nil
	}
	whole, err := b.kv.Get(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithMinCreateRev(last), clientv3.WithMaxCreateRev(last), clientv3.WithRev(rev))
	if err != nil {
		return nil, b.interpret(ctx, op, err)
	}
	return whole.Kvs, nil
}

// prunedValue encodes the greatest id a prune removed as the value of a
// P/a/\x01pruned\x01NS entry: fixed-width decimal, so that etcd's
// byte-wise compare orders them.
func prunedValue(id int64) string { return fmt.Sprintf("%020d", id) }

// raisePruned returns the operations that raise the P/a/\x01pruned\x01NS
// entries to the greatest create revision among victims, per namespace and
// for the whole trail (""), each a nested Txn that puts only when the
// entry holds less (or is absent: etcd fails a value compare on a missing
// key), so that concurrent prunes never lower it.
func (b *Backend) raisePruned(victims []victim) []clientv3.Op {
	top := map[string]int64{}
	for _, v := range victims {
		top[v.ns] = max(top[v.ns], v.rev)
		top[""] = max(top[""], v.rev)
	}
	ops := make([]clientv3.Op, 0, len(top))
	for ns, rev := range top {
		// Value compares take no ">=": value > rev-1 holds as much.
		k := b.keys.prunedThrough(ns)
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), ">", prunedValue(rev-1))}, nil,
			[]clientv3.Op{clientv3.OpPut(k, prunedValue(rev))}))
	}
	return ops
}

// victim is an audit record a prune removes.
type victim struct {
	key, ns string
	rev     int64 // its create revision: the record's id
	lease   leaseToken
	op      protocol.Op
}

// leaseToken names one lease: its key and fencing token.
type leaseToken struct {
	key   protocol.Key
	token int64
}

// spareLive returns victims without the records that a retry of a change
// of a lease live now is answered from (a retry reads the trail by
// request id, P/a/NS\x00REQUEST-ID): the record of the acquire that
// issued the live lease's token, and of its latest renew (latest: the
// greatest id of each lease's renew records in the trail). needed indexes
// the victims that are acquires or renews. The leases are read after the
// trail, so every lease whose records the prune read and that is still
// live is seen live; one that ends meanwhile keeps its records until the
// next prune (no lease read as ended is live again: a renew needs a live
// lease). Records of a lease that ended, by release, revoke or expiry,
// and a live lease's earlier renews stay victims.
func (b *Backend) spareLive(ctx context.Context, victims []victim, needed []int, latest map[leaseToken]int64) ([]victim, error) {
	if len(needed) == 0 {
		return victims, nil
	}
	var keys []protocol.Key
	seen := map[protocol.Key]bool{}
	for _, i := range needed {
		if k := victims[i].lease.key; !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	live, err := b.liveTokens(ctx, keys)
	if err != nil {
		return nil, err
	}
	spared := map[int]bool{}
	for _, i := range needed {
		v := victims[i]
		if live[v.lease.key] == v.lease.token && (v.op == protocol.OpAcquire || latest[v.lease] == v.rev) {
			spared[i] = true
		}
	}
	if len(spared) == 0 {
		return victims, nil
	}
	out := make([]victim, 0, len(victims)-len(spared))
	for i, v := range victims {
		if !spared[i] {
			out = append(out, v)
		}
	}
	return out, nil
}

// liveReadKeys is how many keys' entries liveTokens reads in one
// transaction (two operations a key, within etcd's default 128).
const liveReadKeys = 50

// liveTokens reads the token of the lease live now at each of keys: the
// ModRevision of its o entry, while its e entry keeps it live. It reads
// the two entries by name (never what else lies under a key's prefix),
// liveReadKeys keys a read-only transaction, each at one revision; on a
// cluster whose --max-txn-ops is lower, a transaction it refuses is sent
// again for half as many keys.
func (b *Backend) liveTokens(ctx context.Context, keys []protocol.Key) (map[protocol.Key]int64, error) {
	live := map[protocol.Key]int64{}
	per := liveReadKeys
	for len(keys) > 0 {
		n := min(per, len(keys))
		ops := make([]clientv3.Op, 0, 2*n)
		for _, k := range keys[:n] {
			base := b.keys.lease(k)
			ops = append(ops, clientv3.OpGet(base+suffixO[1:]), clientv3.OpGet(base+suffixE[1:]))
		}
		resp, err := b.kv.Txn(ctx).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) && n > 1 {
			per = n / 2
			continue
		}
		if err != nil {
			return nil, b.interpret(ctx, audit.OpPrune, err)
		}
		in := b.instant()
		for i, k := range keys[:n] {
			o, e := resp.Responses[2*i].GetResponseRange().GetKvs(), resp.Responses[2*i+1].GetResponseRange().GetKvs()
			if len(o) == 1 && len(e) == 1 && in.live(e[0]) {
				live[k] = o[0].ModRevision
			}
		}
		keys = keys[n:]
	}
	return live, nil
}

// auditOf decodes the audit entry kv; ok is false for an entry that is no
// record (the prune mark).
func (b *Backend) auditOf(kv *mvccpb.KeyValue) (audit.Record, bool, error) {
	if _, _, ok := b.keys.parseAuditKey(string(kv.Key)); !ok {
		return audit.Record{}, false, nil
	}
	rec, err := decodeAudit(string(kv.Key), kv.Value, kv.CreateRevision)
	return rec.Record, err == nil, err
}

// pruneBatch is how many records one prune transaction deletes (etcd
// allows 128 operations in a transaction by default).
const pruneBatch = 100

// PruneAudit removes every record older than r.Before, oldest first, but
// those a live lease needs (spareLive: the records of a live lease's
// acquire and latest renew, which a retry of either replays from, stay;
// see [audit.Pruner]), in transactions of up to 100 deletions, of the records read only (their
// create revisions compared; when one changed, the transaction applies
// nothing, and the batch is sent again without the records gone or
// written anew: a record written under the same key since, by a request
// retried after another prune removed its record, stays, and the prune's
// record counts what it removed); each transaction also puts the prune mark
// (P/a/\x01prune), so that a follower tells these deletions from
// tampering, raises the greatest id removed of each namespace it removes
// from (P/a/\x01pruned\x01NS, so that a read from a cursor below it
// fails: audit.ErrPruned), and writes a prune record (the last's carries
// the request id and counts the whole prune; every other's, of a request
// id of its own, counts the prune so far, so that a prune that stops early
// has recorded what it removed). On a
// cluster whose --max-txn-ops is lower, a transaction it refuses as too
// large (which applied nothing) is sent again with half the deletions.
// The first of several transactions claims the request id
// (P/a/\x01claim\x01ID, put only while absent, compared by the next
// transactions, deleted by the last or by a prune that stops early, after
// it answers when its context ended first: see dropClaim): of
// two prunes with one request id at once, one removes records and counts
// them all, the other removes nothing and answers invalid, as a prune
// whose request id is in the trail does (see [backendkit.PruneIDUsed]).
// A cut-off after the backend's clock, which stamps the records, is
// refused (see [backendkit.PruneCutOff]). Each transaction applies only
// while the store's format record exists (storeCmp): in a store destroyed
// meanwhile the prune fails matching [ErrNoStore] and writes nothing more.
//
// A ctx without a deadline gets no default: a long prune may rightly take
// long (see [audit.Pruner]).
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	if err := b.open(audit.OpPrune); err != nil {
		return audit.PruneResult{}, err
	}
	var err error
	if r.Before, err = backendkit.PruneCutOff(r.Before, b.instant().now); err != nil {
		return audit.PruneResult{}, err
	}
	own, claim := b.keys.audit("", r.RequestID), b.keys.claim(r.RequestID)
	if err := b.awaitClaimDrop(ctx, claim); err != nil { // a retry of a prune this Backend cut off
		return audit.PruneResult{}, err
	}
	if g, err := b.kv.Txn(ctx).Then(clientv3.OpGet(own, clientv3.WithCountOnly()), clientv3.OpGet(claim, clientv3.WithCountOnly())).Commit(); err != nil {
		return audit.PruneResult{}, b.interpret(ctx, audit.OpPrune, err)
	} else if g.Responses[0].GetResponseRange().Count+g.Responses[1].GetResponseRange().Count > 0 {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	var (
		victims []victim
		after   int64
		// needed: of the victims, those a live lease may need (an acquire
		// or a renew: see spareLive); latest: each lease's latest renew.
		needed []int
		latest = map[leaseToken]int64{}
	)
	prefix := b.keys.audits()
	for {
		resp, err := b.kv.Get(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithMinCreateRev(after+1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(auditPage))
		if err != nil {
			return audit.PruneResult{}, b.interpret(ctx, audit.OpPrune, err)
		}
		kvs, err := b.wholeRevisions(ctx, audit.OpPrune, resp, prefix, resp.Header.Revision)
		if err != nil {
			return audit.PruneResult{}, err
		}
		for _, kv := range kvs {
			after = kv.CreateRevision
			rec, ok, err := b.auditOf(kv)
			if err != nil {
				return audit.PruneResult{}, b.interpret(ctx, audit.OpPrune, err)
			}
			if !ok {
				continue
			}
			lt := leaseToken{protocol.Key{Namespace: rec.Namespace, Name: rec.Key}, rec.Token}
			if rec.Op == protocol.OpRenew {
				latest[lt] = max(latest[lt], kv.CreateRevision)
			}
			if rec.At.Before(r.Before) {
				if rec.Op == protocol.OpAcquire || rec.Op == protocol.OpRenew {
					needed = append(needed, len(victims))
				}
				victims = append(victims, victim{key: string(kv.Key), ns: rec.Namespace, rev: kv.CreateRevision, lease: lt, op: rec.Op})
			}
		}
		if !resp.More {
			break
		}
	}
	if victims, err = b.spareLive(ctx, victims, needed, latest); err != nil {
		return audit.PruneResult{}, err
	}
	var res audit.PruneResult
	var claimRev int64 // the claim's create revision, once this prune's first batch put it
	fail := func(err error) (audit.PruneResult, error) {
		if claimRev != 0 {
			// Waited for while ctx lasts (so that a retry right after
			// finds the request id free), not past it.
			select {
			case <-b.dropClaim(ctx, claim, claimRev):
			case <-ctx.Done():
			}
		}
		return res, err
	}
	mark := clientv3.OpPut(b.keys.pruneMark(), r.RequestID)
	batch := pruneBatch
	for {
		n := min(len(victims), batch)
		ops := []clientv3.Op{mark}
		// Only the records read, every one still there: once another
		// prune removed one, a request retried with its id may have
		// written a new record under the same key, which is no victim.
		// Otherwise (Else) each victim is read again, to leave out those
		// gone or written anew, and the batch is sent again. The request
		// id unused and its claim absent (first batch) or this prune's.
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(own), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(claim), "=", claimRev), b.storeCmp()}
		recheck := []clientv3.Op{clientv3.OpGet(own, clientv3.WithCountOnly()), clientv3.OpGet(claim, clientv3.WithKeysOnly())}
		for _, v := range victims[:n] {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(v.key), "=", v.rev))
			ops = append(ops, clientv3.OpDelete(v.key))
			recheck = append(recheck, clientv3.OpGet(v.key, clientv3.WithKeysOnly()))
		}
		recheck = append(recheck, b.storeGet())
		ops = append(ops, b.raisePruned(victims[:n])...)
		last := n == len(victims)
		var rec backendkit.Recorded
		switch {
		case !last && claimRev == 0:
			ops = append(ops, clientv3.OpPut(claim, fmt.Sprintf("prune by %s before %s", r.Actor, r.Before.UTC().Format(time.RFC3339Nano))))
		case last && claimRev != 0:
			ops = append(ops, clientv3.OpDelete(claim))
		}
		// Every transaction writes a prune record, so that what it removes
		// is recorded even if the prune stops after it: the last's carries
		// the request id and counts the whole prune; every other's a
		// request id of its own (the prune's stays free for a prune sent
		// again after it stopped early), counting the prune so far. A
		// transaction sent again (ErrTooManyOps, a victim gone) writes
		// only the record it commits with.
		removed := res.Removed + int64(n)
		rec = backendkit.Recorded{Record: audit.Record{At: b.instant().now, Op: audit.OpPrune, RequestID: r.RequestID,
			Actor: r.Actor, Reason: backendkit.PruneReason(removed, r.Before), Status: audit.StatusPruned,
			Version: audit.RecordFormatVersion}}
		at := own
		if !last {
			rec.RequestID, rec.Reason = protocol.RandomRequestID(), backendkit.PruneBatchReason(removed, r)
			at = b.keys.audit("", rec.RequestID)
		}
		ops = append(ops, clientv3.OpPut(at, encodeAudit(at, rec)))
		resp, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).Else(recheck...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) && n > 1 {
			batch = n / 2 // refused whole: the same records again, in a smaller transaction
			continue
		}
		if err != nil {
			return fail(b.interpret(ctx, audit.OpPrune, err))
		}
		if !resp.Succeeded {
			if storeGone(resp.Responses[len(resp.Responses)-1]) {
				return fail(b.interpret(ctx, audit.OpPrune, ErrNoStore))
			}
			held := resp.Responses[1].GetResponseRange().GetKvs()
			switch {
			case claimRev != 0 && (len(held) == 0 || held[0].CreateRevision != claimRev):
				return fail(backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
					"%s: the claim %q of this prune's request id was deleted or written outside this prune, after it removed %d records; "+
						"the prune records of its batches count them: prune again with another request id", b.shown, claim, res.Removed))
			case resp.Responses[0].GetResponseRange().GetCount() > 0 || len(held) > 0:
				return fail(backendkit.PruneIDUsed(r.RequestID))
			}
			kept := victims[:0:0]
			for i, v := range victims[:n] {
				if kvs := resp.Responses[i+2].GetResponseRange().GetKvs(); len(kvs) == 1 && kvs[0].CreateRevision == v.rev {
					kept = append(kept, v)
				}
			}
			victims = append(kept, victims[n:]...)
			continue
		}
		victims = victims[n:]
		for _, op := range resp.Responses[1 : 1+n] {
			res.Removed += op.GetResponseDeleteRange().Deleted
		}
		if claimRev == 0 && !last {
			claimRev = resp.Header.Revision
		}
		if last {
			rec.ID = resp.Header.Revision
			res.Record = rec.Record
			return res, nil
		}
	}
}

// claimDropTimeout bounds a failed prune's deletion of its claim.
const claimDropTimeout = 5 * time.Second

// dropClaim deletes the claim of a prune that stopped before its last
// batch, if it is still the one the prune put (create revision rev), so
// that the prune's request id can be sent again, as on the SQL stores.
// The deletion outlives ctx (whose deadline may be what stopped the
// prune), up to claimDropTimeout, in a goroutine that Close waits for; the
// channel returned is closed when it is done, and until then a prune of
// this Backend with the same request id waits for it (awaitClaimDrop).
// When the deletion fails too (the cluster is unavailable) the claim
// stays, and that request id is refused as used. Once Close has begun, it
// is tried within ctx only.
func (b *Backend) dropClaim(ctx context.Context, claim string, rev int64) <-chan struct{} {
	done := make(chan struct{})
	b.dropsMu.Lock()
	if b.drops == nil {
		b.drops = map[string]chan struct{}{}
	}
	b.drops[claim] = done
	b.dropsMu.Unlock()
	drop := func(ctx context.Context) {
		defer func() {
			b.dropsMu.Lock()
			if b.drops[claim] == done {
				delete(b.drops, claim)
			}
			b.dropsMu.Unlock()
			close(done)
		}()
		dctx, cancel := context.WithTimeout(ctx, claimDropTimeout)
		defer cancel()
		// A failure leaves the claim: the request id stays used.
		_, _ = b.kv.Txn(dctx).If(clientv3.Compare(clientv3.CreateRevision(claim), "=", rev)).Then(clientv3.OpDelete(claim)).Commit()
	}
	if b.closed.Load() || b.claimDrops.Go(func() { drop(context.WithoutCancel(ctx)) }) == nil {
		drop(ctx)
	}
	return done
}

// awaitClaimDrop waits, while ctx lasts, for this Backend's deletion of
// claim under way, if any: a prune cut off by its context answers before
// its claim is deleted, and a retry with its request id must not find it.
func (b *Backend) awaitClaimDrop(ctx context.Context, claim string) error {
	b.dropsMu.Lock()
	done := b.drops[claim]
	b.dropsMu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return b.interpret(ctx, audit.OpPrune, ctx.Err())
	}
}

// ErrCompacted is matched (errors.Is) by the error a [Backend.Follow]
// yields when the revision it must resume from was compacted: the
// deletions made meanwhile can no longer be checked, so the follower stops
// rather than go on past a gap it cannot see. Resume with ReadAudit (or
// audit.Watch) from the last cursor: every record still in the trail is
// there.
var ErrCompacted = errors.New("etcd: the follower's revision was compacted")

// ErrTampered is matched by the error a [Backend.Follow] yields when a
// record of the trail was deleted other than by a prune, and by reads of a
// record that fails its checksum.
var ErrTampered = errors.New("etcd: the audit trail was altered outside leasestore")

// Follow streams the records that q selects (its namespace, key, ops and
// owner; Since is ignored), oldest first, from q.Cursor on, until ctx ends: it reads the
// trail up to now, then watches it from the next revision with etcd's
// Watch, so it sees every record once, in commit order, as it commits. It
// also watches deletions: one made by no prune (no prune mark put in the
// same revision) is yielded as an error matching [ErrTampered], except
// that one made by [Backend.Destroy] (`leasectl migrate down
// --destroy-data`, whose transactions put a mark of their own) is yielded
// as an error matching [ErrNoStore] (status unavailable) and ends the
// stream. When the
// revision to resume from was compacted it yields an error matching
// [ErrCompacted] and ends. When the watch fails otherwise (its member
// lost the leader, as when quorum is lost), the failure is yielded and the
// stream goes on: it watches again from the revision after the last one it
// saw, every 100 ms at first, doubling up to every 2s while it fails. The
// last revision it saw is that of its last record, or of the last
// progress report of its watch when later: it asks for one every 30s
// while the trail is quiet, so that a quiet trail on a cluster that
// writes and compacts other keys is not resumed from a compacted
// revision. A
// failure of the first read is yielded and ends the stream; so does a
// refusal of the credentials or their permission at any time (an error
// matching [protocol.ErrUnauthenticated] or [protocol.ErrForbidden]: the
// user's password changed, its role's permission revoked, met when the
// watch is made again), a cluster whose revision went back, seen by any
// call of the Backend (an error matching [protocol.ErrRestartRequired]:
// refused until the process restarts), and Close (an error matching
// protocol.ErrClosed).
func (b *Backend) Follow(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error] {
	return b.FollowPositions(ctx, q, nil)
}

var _ audit.PositionFollower = (*Backend)(nil)

// FollowPositions is [Backend.Follow] that also calls passed (unless nil)
// with the cursor of each revision up to which it has handled every event
// of the trail, when that is past the last record it yielded: after its
// catch-up read (the read's revision), and after each answer of its watch
// that moved it past records q does not select or to a progress report.
// A prune of records at or below such a cursor removes none the follower
// could still read, so a follower resumed from it is not behind the prune
// (see [audit.PositionFollower]; a served etcd store tells its streams
// these positions).
func (b *Backend) FollowPositions(ctx context.Context, q audit.Query, passed func(cursor string)) iter.Seq2[audit.Record, error] {
	q.Since = time.Time{}
	q.Follow = true // a follower's read: Validate refuses Newest
	return func(yield func(audit.Record, error) bool) {
		var told int64 // the greatest id yielded or told
		yieldRec := func(rec audit.Record, err error) bool {
			if err == nil {
				told = max(told, rec.ID)
			}
			return yield(rec, err)
		}
		var rev int64
		tell := func() {
			if passed != nil && rev > told {
				told = rev
				passed(audit.EncodeCursor(rev))
			}
		}
		for {
			page, r, err := b.readAudit(ctx, q)
			if err != nil {
				yield(audit.Record{}, err)
				return
			}
			for _, rec := range page.Records {
				if !yieldRec(rec, nil) {
					return
				}
				q.Cursor = audit.EncodeCursor(rec.ID)
			}
			if rev == 0 || page.NextCursor == "" {
				rev = r
			}
			if page.NextCursor == "" {
				break
			}
		}
		tell()
		if b.testAfterRead != nil {
			b.testAfterRead()
		}
		// Watch from the revision after the read; when the watch fails (its
		// member lost the leader, the connection broke), yield the failure
		// and watch again from the revision after the last one seen: etcd
		// never splits a revision's events between responses.
		pause := followPause
		for {
			err := b.watchAudit(ctx, q, &rev, func() { pause = followPause }, tell, yieldRec)
			if err == errStopped {
				return
			}
			if b.closed.Load() {
				yield(audit.Record{}, errClosed(protocol.OpAudit))
				return
			}
			if ctx.Err() != nil {
				return
			}
			// A refusal of the credentials or their permission is met
			// again by every new watch, and a cluster whose revision went
			// back is refused until the process restarts: either ends
			// the stream, as on the first read (and as audit.Watch ends).
			if !yield(audit.Record{}, err) || protocol.CredentialsRefused(err) || errors.Is(err, protocol.ErrRestartRequired) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-b.stop:
				yield(audit.Record{}, errClosed(protocol.OpAudit))
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, followMaxPause)
		}
	}
}

// followPause and followMaxPause bound the wait of a follower between a
// failed watch and the next (doubling while they keep failing).
const (
	followPause    = 100 * time.Millisecond
	followMaxPause = 2 * time.Second
)

// followProgress is how long a follower's watch may stay quiet before the
// follower asks for its progress (the revision up to which it has seen
// every event), to move its place past revisions that etcd may compact.
const followProgress = 30 * time.Second

// errStopped is watchAudit's answer when the follower must end: the
// caller stopped ranging, its context ended, or the trail was compacted
// past the follower (yielded already).
var errStopped = errors.New("etcd: follower stopped")

// watchAudit yields the records q selects from revision *rev+1 on, as
// they commit, moving *rev past each revision it handled and to each
// progress report (ok is called on each answer of the watch, moved after
// each answer handled, once *rev moved past it), until the watch fails: it
// returns the failure, interpreted, or errStopped.
//
// A progress report's revision is one up to which the watch has sent
// every event (etcd sends one only to a watch that has caught up), so
// resuming after it misses nothing. The watch asks etcd for reports
// (WithProgressNotify: every 10 minutes by default) and this follower
// requests one after followProgress of quiet; the report goes to every
// watch of the client's stream (the notifier's ignore it).
func (b *Backend) watchAudit(ctx context.Context, q audit.Query, rev *int64, ok, moved func(),
	yield func(audit.Record, error) bool) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// The mark lives outside a namespace's prefix: watch the whole
	// trail and filter, so that a prune's deletions are told apart.
	wch := b.cli.Watch(wctx, b.keys.audits(), clientv3.WithPrefix(), clientv3.WithRev(*rev+1), clientv3.WithProgressNotify())
	quiet := followProgress
	if b.testProgress != 0 {
		quiet = b.testProgress
	}
	ask := time.NewTimer(quiet)
	defer ask.Stop()
	for {
		var wresp clientv3.WatchResponse
		var open bool
		select {
		case wresp, open = <-wch:
		case <-ask.C:
			// A failure to ask shows in the watch itself.
			_ = b.cli.RequestProgress(wctx)
			ask.Reset(quiet)
			continue
		case <-b.stop:
			return errClosed(protocol.OpAudit)
		}
		ask.Reset(quiet)
		// The watch does not pass through the revision guard: once any
		// call of the Backend saw the revision go back, the follower
		// ends too (its cluster's records and tokens cannot be trusted
		// until the process restarts).
		if _, err := b.kv.guard.begin(); err != nil {
			return b.interpret(ctx, protocol.OpAudit, err)
		}
		if !open {
			if ctx.Err() != nil {
				return errStopped
			}
			return backendkit.NewError(protocol.OpAudit, protocol.StatusUnavailable, nil, "%s: the watch ended; watching again", b.shown)
		}
		if wresp.CompactRevision != 0 {
			yield(audit.Record{}, fmt.Errorf("%w: resuming at revision %d, compacted up to %d (%s)", ErrCompacted, *rev+1, wresp.CompactRevision, b.shown))
			return errStopped
		}
		if err := wresp.Err(); err != nil {
			if ctx.Err() != nil {
				return errStopped
			}
			return b.interpret(ctx, protocol.OpAudit, err)
		}
		ok()
		if wresp.IsProgressNotify() {
			*rev = max(*rev, wresp.Header.Revision)
			moved()
			continue
		}
		if !b.yieldEvents(q, wresp.Events, yield) {
			return errStopped
		}
		for _, ev := range wresp.Events {
			*rev = max(*rev, ev.Kv.ModRevision)
		}
		moved()
	}
}

// yieldEvents yields the records of one watch answer that q selects,
// and as ErrTampered each deletion no prune made and each overwrite; a
// deletion Destroy made (its mark put in the same revision) is yielded as
// an error matching ErrNoStore, and ends the follower. It reports false
// when the caller stopped ranging, or the follower must end.
func (b *Backend) yieldEvents(q audit.Query, events []*clientv3.Event, yield func(audit.Record, error) bool) bool {
	pruned, destroyed := map[int64]bool{}, map[int64]bool{}
	for _, ev := range events {
		if ev.Type == clientv3.EventTypePut && string(ev.Kv.Key) == b.keys.pruneMark() {
			pruned[ev.Kv.ModRevision] = true
		}
		if ev.Type == clientv3.EventTypePut && string(ev.Kv.Key) == b.keys.destroyMark() {
			destroyed[ev.Kv.ModRevision] = true
		}
	}
	for _, ev := range events {
		kv := ev.Kv
		ns, _, isRecord := b.keys.parseAuditKey(string(kv.Key))
		if !isRecord {
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			if destroyed[kv.ModRevision] {
				// The store is going: the follower ends.
				yield(audit.Record{}, b.interpret(context.Background(), protocol.OpAudit, &errDestroyed{rev: kv.ModRevision}))
				return false
			}
			if !pruned[kv.ModRevision] {
				if !yield(audit.Record{}, fmt.Errorf("%w: record %q was deleted at revision %d by no prune (%s)",
					ErrTampered, kv.Key, kv.ModRevision, b.shown)) {
					return false
				}
			}
			continue
		}
		if q.Namespace != "" && ns != q.Namespace {
			continue
		}
		if kv.CreateRevision != kv.ModRevision {
			if !yield(audit.Record{}, fmt.Errorf("%w: record %q was overwritten at revision %d (%s)",
				ErrTampered, kv.Key, kv.ModRevision, b.shown)) {
				return false
			}
			continue
		}
		rec, _, err := b.auditOf(kv)
		if err != nil {
			if !yield(audit.Record{}, fmt.Errorf("%w: %v", ErrTampered, err)) {
				return false
			}
			continue
		}
		if !q.Matches(rec) { // the key, ops and owner (Since is zero)
			continue
		}
		if !yield(rec, nil) {
			return false
		}
	}
	return true
}
