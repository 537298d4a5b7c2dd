package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// keyState is what the store holds for one key, read at one revision:
// its owner, renewal, liveness and lock-delay entries (nil when absent).
type keyState struct{ o, r, e, d *mvccpb.KeyValue }

// stateOf sorts the entries of one key into a keyState.
func (b *Backend) stateOf(kvs []*mvccpb.KeyValue) keyState {
	var st keyState
	for _, kv := range kvs {
		_, suffix, ok := b.keys.parseLeaseKey(string(kv.Key))
		if !ok {
			continue
		}
		switch suffix {
		case suffixO:
			st.o = kv
		case suffixR:
			st.r = kv
		case suffixE:
			st.e = kv
		case suffixD:
			st.d = kv
		}
	}
	return st
}

// entrySuffixes are the suffixes of a key's entries, in key order.
var entrySuffixes = [...]string{suffixD, suffixE, suffixO, suffixR}

// entryGets returns the reads of k's entries, each by its name (with opts),
// for a transaction: not by the key's prefix, under which another client's
// keys may lie, as many as it pleases (one response holding them all can
// exceed what a client accepts). entriesIn collects what they found.
func (b *Backend) entryGets(k protocol.Key, opts ...clientv3.OpOption) []clientv3.Op {
	base := b.keys.lease(k)
	gets := make([]clientv3.Op, 0, len(entrySuffixes))
	for _, suffix := range entrySuffixes {
		gets = append(gets, clientv3.OpGet(base+suffix[1:], opts...))
	}
	return gets
}

// entriesIn returns the entries that rs, the answers to entryGets, hold.
func entriesIn(rs []*pb.ResponseOp) []*mvccpb.KeyValue {
	var kvs []*mvccpb.KeyValue
	for _, r := range rs {
		kvs = append(kvs, r.GetResponseRange().GetKvs()...)
	}
	return kvs
}

// instant is the time an operation runs at: now stamps leases and records
// (this process's clock, or the test clock), and judge is the liveness
// bound for compares: "" with etcd leases (an existing e entry is live),
// the test clock's now otherwise (an e entry is live while its expiry is
// greater).
//
// real is this process's clock at the same moment, which sizes etcd
// leases: they count real time on the leader whatever the stamps say.
type instant struct {
	now   time.Time
	real  time.Time
	judge string
}

func (b *Backend) instant() instant {
	now := b.now().UTC().Truncate(time.Microsecond)
	in := instant{now: now, real: time.Now()}
	if b.manual {
		in.judge = expiryValue(now)
	}
	return in
}

// live reports whether the e entry e keeps its lease live at in.
func (in instant) live(e *mvccpb.KeyValue) bool { return e != nil && string(e.Value) > in.judge }

// delayJudge is judge for a d entry, whose value goes on after the
// expiry: any value whose expiry equals judge's is below judge+"\xff".
func (in instant) delayJudge() string {
	if in.judge == "" {
		return ""
	}
	return in.judge + "\xff"
}

// delaying reports whether the d entry d keeps its key at in.
func (in instant) delaying(d *mvccpb.KeyValue) bool {
	return d != nil && string(d.Value) > in.delayJudge()
}

// liveCmp is the compare that holds while the key's lease is live.
func (b *Backend) liveCmp(k protocol.Key, in instant) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(b.keys.lease(k)+suffixE[1:]), ">", in.judge)
}

// delayCmp is the compare that holds while a lock-delay keeps the key.
func (b *Backend) delayCmp(k protocol.Key, in instant) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(b.keys.lease(k)+suffixD[1:]), ">", in.delayJudge())
}

// delayed returns the ended lease whose lock-delay keeps k at in, or nil.
// A delay written by an acquire holds no token: the o entry's is the
// lease's while it stays.
func (b *Backend) delayed(op protocol.Op, k protocol.Key, st keyState, in instant) (*protocol.Lease, error) {
	if !in.delaying(st.d) {
		return nil, nil
	}
	l, err := decodeDelay(k, st.d.Value)
	if err != nil {
		return nil, errInternal(op, "%s: key %s: %v", b.shown, k, err)
	}
	if l.Token == 0 && st.o != nil {
		l.Token = st.o.ModRevision
	}
	return &l, nil
}

// delayPut returns the writes of k's lock-delay entry for l (planned to
// end at l.ExpiresAt): a put attached to the etcd lease id, which lives
// until the delay's end (see stamp). For a lease without a lock-delay
// there is nothing to write with etcd leases (an ended delay's entry is
// gone), and under the test clock a delete of an ended one.
func (b *Backend) delayPut(l protocol.Lease, id clientv3.LeaseID) []clientv3.Op {
	key := b.keys.lease(l.Key) + suffixD[1:]
	switch {
	case l.LockDelay == 0 && b.manual:
		return []clientv3.Op{clientv3.OpDelete(key)}
	case l.LockDelay == 0:
		return nil
	case b.manual:
		return []clientv3.Op{clientv3.OpPut(key, encodeDelay(l))}
	}
	return []clientv3.Op{clientv3.OpPut(key, encodeDelay(l), clientv3.WithLease(id))}
}

// stampAttempts bounds how often stamp asks for longer etcd leases.
const stampAttempts = 4

// stamp returns the instant a change records and the etcd leases its
// entries attach to: the i-th lives at least lives[i] past the instant
// (none for a lives[i] of 0, nor under the test clock). The instant is
// read after the grants it waits for, just before the transaction, so
// that a change the transaction comes after is never dated later by the
// same clock (contract v3: the time a change takes effect is the time it
// records). When the wait left a lease too short for the later instant,
// it asks again for leases longer by that wait (which may then end that
// much later than needed), up to stampAttempts times in all.
func (b *Backend) stamp(ctx context.Context, op protocol.Op, lives ...time.Duration) (instant, []clientv3.LeaseID, error) {
	ids := make([]clientv3.LeaseID, len(lives))
	in := b.instant()
	if b.manual {
		return in, ids, nil
	}
	var pad time.Duration
	for attempt := 1; ; attempt++ {
		untils := make([]time.Time, len(lives))
		for i, d := range lives {
			if d <= 0 {
				continue
			}
			id, until, err := b.expiry.forExpiry(ctx, in.real.Add(d+pad))
			if err != nil {
				return instant{}, nil, err
			}
			ids[i], untils[i] = id, until
		}
		next := b.instant()
		short := false
		for i, d := range lives {
			short = short || (d > 0 && untils[i].Before(next.real.Add(d)))
		}
		if !short {
			return next, ids, nil
		}
		pad = next.real.Sub(in.real)
		if attempt == stampAttempts {
			return instant{}, nil, backendkit.NewError(op, protocol.StatusUnavailable, nil,
				"%s: etcd lease grants took longer each time (%d grants, the last %v): nothing was written; retry with the same request id",
				b.shown, stampAttempts, pad.Round(time.Millisecond))
		}
		in = next
	}
}

// leaseOf returns the lease that st holds for k (nil when there is none)
// and whether it is live at in.
func (b *Backend) leaseOf(op protocol.Op, k protocol.Key, st keyState, in instant) (*protocol.Lease, bool, error) {
	if st.o == nil {
		return nil, false, nil
	}
	owner, acquiredAt, err := parseOwnerValue(string(st.o.Value))
	if err != nil {
		return nil, false, errInternal(op, "%s: key %s: %v", b.shown, k, err)
	}
	if st.r == nil {
		return nil, false, errInternal(op, "%s: key %s has no renewal entry", b.shown, k)
	}
	r, err := decodeLease(st.r.Value)
	if err != nil {
		return nil, false, errInternal(op, "%s: key %s: %v", b.shown, k, err)
	}
	l := &protocol.Lease{Key: k, Owner: owner, Token: st.o.ModRevision, AcquiredAt: acquiredAt,
		RenewedAt: fromMicro(r.RenewedAt), ExpiresAt: fromMicro(r.ExpiresAt), Version: r.V, LockDelay: time.Duration(r.LockDelay)}
	return l, in.live(st.e), nil
}

// judgeAt returns the time at which cur.LiveAt answers live, so that the
// shared precedence (backendkit.Check*) classifies with this backend's
// liveness: the cluster's (the e entry), not a clock's.
func judgeAt(cur *protocol.Lease, live bool) time.Time {
	if live || cur == nil {
		return time.Time{}
	}
	return cur.ExpiresAt
}

// stateCache keeps the last state this Backend saw of each key, so that a
// renew, release or revoke of a lease it acquired or read needs no read
// before its transaction: the transaction compares the entries'
// revisions with the cached ones and, when they moved, answers the current
// state in the same round trip. A refusal is only ever answered from a
// fresh read.
type stateCache struct {
	mu sync.Mutex
	m  map[protocol.Key]keyState
}

const stateCacheSize = 8192

func (c *stateCache) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = make(map[protocol.Key]keyState)
}

func (c *stateCache) get(k protocol.Key) (keyState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[k]
	return st, ok
}

func (c *stateCache) put(k protocol.Key, st keyState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.o == nil {
		delete(c.m, k)
		return
	}
	if len(c.m) >= stateCacheSize {
		clear(c.m)
	}
	c.m[k] = st
}

// open checks that the Backend is open, and its client too (the
// client's calls would fail only after its retries).
func (b *Backend) open(op protocol.Op) error {
	if b.closed.Load() {
		return errClosed(op)
	}
	if err := b.cli.Ctx().Err(); err != nil {
		return b.interpret(context.Background(), op, err)
	}
	return nil
}

// storeCmp is the compare every change's transaction makes: the store's
// format record exists. A store destroyed (Destroy: `leasectl migrate down
// --destroy-data`) after this Backend opened it is then left empty: the
// change writes nothing and fails matching [ErrNoStore] (storeGone tells,
// from the answer of storeGet in the branch taken when a compare fails),
// rather than write a lease, its record and the revision mark under a
// prefix that holds no store, which the next Open would take for one.
func (b *Backend) storeCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(b.keys.meta()), ">", 0)
}

// storeGet reads whether the store's format record exists (storeGone).
func (b *Backend) storeGet() clientv3.Op {
	return clientv3.OpGet(b.keys.meta(), clientv3.WithCountOnly())
}

// storeGone reports whether r, the answer to storeGet, found no format
// record.
func storeGone(r *pb.ResponseOp) bool { return r.GetResponseRange().GetCount() == 0 }

// Acquire takes the lease on req.Key when no live lease holds it, in one
// transaction: unless the request id was used, and unless the key's
// liveness entry is live, it writes the owner, renewal and liveness entries
// (the last attached to an etcd lease) and the audit record. The token is
// the transaction's revision. Like every change, it applies only while the
// store's format record exists (storeCmp).
func (b *Backend) Acquire(ctx context.Context, req protocol.AcquireRequest) (res protocol.Result, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseAcquire(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpAcquire, req.Key, req.RequestID, &res, &err)
	if err := b.open(protocol.OpAcquire); err != nil {
		return protocol.Result{}, err
	}
	fp := backendkit.Fingerprint(req)
	idem := b.keys.audit(req.Key.Namespace, req.RequestID)
	for attempt := 0; ; attempt++ {
		in, ids, err := b.stamp(ctx, protocol.OpAcquire, req.TTL, delayLife(req.TTL, req.StoredLockDelay()))
		if err != nil {
			return protocol.Result{}, b.interpret(ctx, protocol.OpAcquire, err)
		}
		exp := in.now.Add(req.TTL).Truncate(time.Microsecond)
		l := protocol.Lease{Key: req.Key, Owner: req.Owner, AcquiredAt: in.now, RenewedAt: in.now, ExpiresAt: exp,
			Version: protocol.LeaseFormatVersion, LockDelay: req.StoredLockDelay()}
		put := b.livenessPut(req.Key, exp, ids[0])
		dput := b.delayPut(l, ids[1])
		rec := backendkit.NewRecorded(in.now, protocol.OpAcquire, protocol.StatusAcquired, l, req.RequestID, fp, req.Owner, "")
		base := b.keys.lease(req.Key)
		rv := encodeLease(in.now, exp, req.TTL, l.LockDelay)
		read := b.entryGets(req.Key)
		// Unless the request id was used: if the lease is live, read the
		// key (conflict); else if a lock-delay keeps it, read it
		// (conflict); else take it.
		resp, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(idem), "=", 0), b.storeCmp()).
			Then(clientv3.OpTxn([]clientv3.Cmp{b.liveCmp(req.Key, in)}, read,
				[]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{b.delayCmp(req.Key, in)}, read, append([]clientv3.Op{
					clientv3.OpPut(base+suffixO[1:], ownerValue(req.Owner, in.now)),
					clientv3.OpPut(base+suffixR[1:], rv),
					put,
					clientv3.OpPut(idem, encodeAudit(idem, rec)),
				}, append(dput, b.markOps(0)...)...))})).
			Else(clientv3.OpGet(idem), b.storeGet()).Commit()
		if err != nil {
			if b.staleGrant(err, ids...) && attempt == 0 {
				continue
			}
			return protocol.Result{}, b.interpret(ctx, protocol.OpAcquire, err)
		}
		if !resp.Succeeded {
			if storeGone(resp.Responses[1]) {
				return protocol.Result{}, b.interpret(ctx, protocol.OpAcquire, ErrNoStore)
			}
			rec, err := b.prior(protocol.OpAcquire, resp.Responses[0].GetResponseRange().Kvs)
			if err != nil {
				return protocol.Result{}, err
			}
			return backendkit.ReplayAcquire(rec, req), nil
		}
		inner := resp.Responses[0].GetResponseTxn()
		if !inner.Succeeded {
			inner = inner.Responses[0].GetResponseTxn()
		}
		if inner.Succeeded {
			st := b.stateOf(entriesIn(inner.Responses))
			b.cache.put(req.Key, st)
			return b.conflict(st, req.Key, in)
		}
		rev := resp.Header.Revision
		l.Token = rev
		st := keyState{
			o: &mvccpb.KeyValue{Value: []byte(ownerValue(req.Owner, in.now)), ModRevision: rev, CreateRevision: rev},
			r: &mvccpb.KeyValue{Value: []byte(rv), ModRevision: rev},
			e: &mvccpb.KeyValue{Value: []byte(expiryValue(exp)), ModRevision: rev},
		}
		if l.LockDelay > 0 {
			st.d = &mvccpb.KeyValue{Value: []byte(encodeDelay(l)), ModRevision: rev}
		}
		b.cache.put(req.Key, st)
		return protocol.Result{Status: protocol.StatusAcquired, Lease: &l}, nil
	}
}

// conflict is the answer to an acquire that st refused at in: the live
// lease (with a message saying it expired, when the cluster still holds it
// past its expires_at), or the ended lease whose lock-delay keeps the key.
func (b *Backend) conflict(st keyState, k protocol.Key, in instant) (protocol.Result, error) {
	cur, live, err := b.leaseOf(protocol.OpAcquire, k, st, in)
	if err != nil {
		return protocol.Result{}, err
	}
	if !live {
		ended, err := b.delayed(protocol.OpAcquire, k, st, in)
		if err != nil {
			return protocol.Result{}, err
		}
		if ended != nil {
			return protocol.Result{Status: protocol.StatusConflict, Lease: ended, Message: backendkit.LockDelayMessage(*ended, in.now)}, nil
		}
	}
	res := backendkit.Refused(protocol.StatusConflict, cur)
	if cur != nil && live {
		// Live by the cluster, which sees expiry late, never early: past
		// its expires_at by the clock, say so rather than "held until".
		res.Message = backendkit.ExpiredMessage(*cur, in.now)
	}
	return res, nil
}

// livenessPut returns the put of k's liveness entry for a lease that
// expires at exp (stamped): attached to the etcd lease id, which lives at
// least until then (see stamp), or, under the test clock, to none.
func (b *Backend) livenessPut(k protocol.Key, exp time.Time, id clientv3.LeaseID) clientv3.Op {
	key := b.keys.lease(k) + suffixE[1:]
	if b.manual {
		return clientv3.OpPut(key, expiryValue(exp))
	}
	return clientv3.OpPut(key, expiryValue(exp), clientv3.WithLease(id))
}

// delayLife is how long past its instant a lease of ttl needs the etcd
// lease of its lock-delay entry: 0 (none) without a delay.
func delayLife(ttl, delay time.Duration) time.Duration {
	if delay == 0 {
		return 0
	}
	return ttl + delay
}

// staleGrant reports whether err says that an etcd lease of ids is gone
// (it expired, or the cluster was restored), and forgets their grants if so.
func (b *Backend) staleGrant(err error, ids ...clientv3.LeaseID) bool {
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false
	}
	stale := false
	for _, id := range ids {
		if id != 0 {
			b.expiry.dropID(id)
			stale = true
		}
	}
	return stale
}

// replay answers a request whose id is in the trail as kvs' record.
func (b *Backend) replay(op protocol.Op, kvs []*mvccpb.KeyValue, fp string) (protocol.Result, error) {
	rec, err := b.prior(op, kvs)
	if err != nil {
		return protocol.Result{}, err
	}
	return backendkit.Replay(rec, op, fp), nil
}

// prior decodes kvs' record, that of a request id found in the trail.
func (b *Backend) prior(op protocol.Op, kvs []*mvccpb.KeyValue) (backendkit.Recorded, error) {
	if len(kvs) == 0 {
		return backendkit.Recorded{}, errInternal(op, "%s: the idempotency record vanished during the operation", b.shown)
	}
	rec, err := decodeAudit(string(kvs[0].Key), kvs[0].Value, kvs[0].CreateRevision)
	if err != nil {
		return backendkit.Recorded{}, interpretError(context.Background(), op, b.shown, b.cli.Username != "", err)
	}
	return rec, nil
}

// holderChange is a renew, release or revoke: how to classify the current
// lease and what to write when it may go ahead.
type holderChange struct {
	op        protocol.Op
	key       protocol.Key
	requestID string
	fp        string
	// check returns "" when the change may go ahead on cur (nil: no
	// lease), live or not.
	check func(cur *protocol.Lease, live bool) protocol.Status
	// lives says how long past its instant each etcd lease the change
	// attaches entries to must live (see stamp); nil when it needs none.
	lives func(cur protocol.Lease) []time.Duration
	// apply returns the writes of the change on the live lease cur at in,
	// whose entries attach to the etcd leases ids (as lives asked), the
	// lease to answer, the record, and the key's state after the change
	// (for the cache).
	apply func(cur protocol.Lease, st keyState, in instant, ids []clientv3.LeaseID) holderWrite
}

type holderWrite struct {
	ops    []clientv3.Op
	lease  protocol.Lease
	rec    backendkit.Recorded
	after  func(rev int64) keyState // the state after the change, for the cache
	status protocol.Status
}

// maxAttempts bounds the transactions of one change that meets others on
// the same key.
const maxAttempts = 32

// holder runs c: one transaction when the cached state of the key is
// current, a read and a transaction otherwise, again while other changes of
// the key move it meanwhile. The read and the transaction also read or
// compare the store's format record (storeCmp): without a store, c fails
// matching ErrNoStore.
func (b *Backend) holder(ctx context.Context, c holderChange) (protocol.Result, error) {
	if err := b.open(c.op); err != nil {
		return protocol.Result{}, err
	}
	idem := b.keys.audit(c.key.Namespace, c.requestID)
	base := b.keys.lease(c.key)
	// The request id's record, the key's entries, the store's format record.
	read := append(append([]clientv3.Op{clientv3.OpGet(idem)}, b.entryGets(c.key)...), b.storeGet())
	st, cached := b.cache.get(c.key)
	fresh := false
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if !cached && !fresh {
			resp, err := b.kv.Txn(ctx).Then(read...).Commit()
			if err != nil {
				return protocol.Result{}, b.interpret(ctx, c.op, err)
			}
			if storeGone(resp.Responses[len(resp.Responses)-1]) {
				return protocol.Result{}, b.interpret(ctx, c.op, ErrNoStore)
			}
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				return b.replay(c.op, kvs, c.fp)
			}
			st, fresh = b.stateOf(entriesIn(resp.Responses[1:len(resp.Responses)-1])), true
		}
		in := b.instant()
		cur, live, err := b.leaseOf(c.op, c.key, st, in)
		if err != nil {
			return protocol.Result{}, err
		}
		if status := c.check(cur, live); status != "" {
			if !fresh {
				cached = false // a cached state may be stale: refuse only on a fresh read
				continue
			}
			b.cache.put(c.key, st)
			return backendkit.Refused(status, cur), nil
		}
		var lives []time.Duration
		if c.lives != nil {
			lives = c.lives(*cur)
		}
		in, ids, err := b.stamp(ctx, c.op, lives...)
		if err != nil {
			return protocol.Result{}, b.interpret(ctx, c.op, err)
		}
		w := c.apply(*cur, st, in, ids)
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(idem), "=", 0),
			clientv3.Compare(clientv3.ModRevision(base+suffixO[1:]), "=", st.o.ModRevision),
			clientv3.Compare(clientv3.ModRevision(base+suffixR[1:]), "=", st.r.ModRevision),
			b.liveCmp(c.key, in),
			b.storeCmp(),
		}
		ops := append(append(w.ops, clientv3.OpPut(idem, encodeAudit(idem, w.rec))), b.markOps(cur.Token)...)
		resp, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).
			Else(read...).Commit()
		if err != nil {
			if b.staleGrant(err, ids...) {
				continue
			}
			return protocol.Result{}, b.interpret(ctx, c.op, err)
		}
		if !resp.Succeeded && storeGone(resp.Responses[len(resp.Responses)-1]) {
			return protocol.Result{}, b.interpret(ctx, c.op, ErrNoStore)
		}
		if resp.Succeeded {
			b.cache.put(c.key, w.after(resp.Header.Revision))
			l := w.lease
			return protocol.Result{Status: w.status, Lease: &l}, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return b.replay(c.op, kvs, c.fp)
		}
		st, fresh, cached = b.stateOf(entriesIn(resp.Responses[1:len(resp.Responses)-1])), true, true
	}
	return protocol.Result{}, errInternal(c.op, "%s: key %s kept changing under %d attempts; retry with the same request id",
		b.shown, c.key, maxAttempts)
}

// Renew extends the holder's live lease to expire req.TTL from now (a
// zero TTL keeps the lease's own), keeping its token: one transaction that compares the key's entries with
// the state last seen and writes the renewal and liveness entries and the
// audit record.
func (b *Backend) Renew(ctx context.Context, req protocol.RenewRequest) (res protocol.Result, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseRenew(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRenew, req.Key, req.RequestID, &res, &err)
	return b.holder(ctx, b.renewChange(req))
}

func (b *Backend) renewChange(req protocol.RenewRequest) holderChange {
	base := b.keys.lease(req.Key)
	return holderChange{
		op: protocol.OpRenew, key: req.Key, requestID: req.RequestID, fp: backendkit.Fingerprint(req),
		check: func(cur *protocol.Lease, live bool) protocol.Status {
			return backendkit.CheckHolder(cur, req.Owner, req.Token, judgeAt(cur, live))
		},
		lives: func(cur protocol.Lease) []time.Duration {
			ttl := renewTTL(req, cur)
			return []time.Duration{ttl, delayLife(ttl, cur.LockDelay)}
		},
		apply: func(cur protocol.Lease, st keyState, in instant, ids []clientv3.LeaseID) holderWrite {
			ttl := renewTTL(req, cur)
			exp := in.now.Add(ttl).Truncate(time.Microsecond)
			put := b.livenessPut(req.Key, exp, ids[0])
			l := cur
			l.RenewedAt, l.ExpiresAt = in.now, exp
			dput := b.delayPut(l, ids[1])
			rv := encodeLease(in.now, exp, ttl, l.LockDelay)
			return holderWrite{
				ops:    append([]clientv3.Op{clientv3.OpPut(base+suffixR[1:], rv), put}, dput...),
				lease:  l,
				rec:    backendkit.NewRecorded(in.now, protocol.OpRenew, protocol.StatusRenewed, l, req.RequestID, backendkit.Fingerprint(req), req.Owner, ""),
				status: protocol.StatusRenewed,
				after: func(rev int64) keyState {
					after := keyState{o: st.o, r: &mvccpb.KeyValue{Value: []byte(rv), ModRevision: rev},
						e: &mvccpb.KeyValue{Value: []byte(expiryValue(exp)), ModRevision: rev}}
					if l.LockDelay > 0 {
						after.d = &mvccpb.KeyValue{Value: []byte(encodeDelay(l)), ModRevision: rev}
					}
					return after
				},
			}
		},
	}
}

// renewTTL is the TTL req renews cur for: the lease's own when req gives none.
func renewTTL(req protocol.RenewRequest, cur protocol.Lease) time.Duration {
	if req.TTL == 0 {
		return cur.ExpiresAt.Sub(cur.RenewedAt)
	}
	return req.TTL
}

// Release deletes the holder's live lease (its entries, its lock-delay's
// too) and records it, in one transaction. The result carries the lease as it was.
func (b *Backend) Release(ctx context.Context, req protocol.ReleaseRequest) (res protocol.Result, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseRelease(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRelease, req.Key, req.RequestID, &res, &err)
	fp := backendkit.Fingerprint(req)
	return b.holder(ctx, holderChange{
		op: protocol.OpRelease, key: req.Key, requestID: req.RequestID, fp: fp,
		check: func(cur *protocol.Lease, live bool) protocol.Status {
			return backendkit.CheckHolder(cur, req.Owner, req.Token, judgeAt(cur, live))
		},
		apply: func(cur protocol.Lease, _ keyState, in instant, _ []clientv3.LeaseID) holderWrite {
			w := b.removal(cur, backendkit.NewRecorded(in.now, protocol.OpRelease, protocol.StatusReleased, cur,
				req.RequestID, fp, req.Owner, ""))
			// A release frees the key at once: every entry goes, its
			// lock-delay's too, each by its name (another client's keys
			// may lie under the key's prefix).
			w.ops = append(w.ops, clientv3.OpDelete(b.keys.lease(cur.Key)+suffixD[1:]))
			return w
		},
	})
}

// Revoke deletes the live lease at req.Key (only the one with req.Token
// when it is non-zero) and records the actor and reason; a lease with a
// lock-delay leaves its delay entry, from now.
func (b *Backend) Revoke(ctx context.Context, req protocol.RevokeRequest) (res protocol.Result, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseRevoke(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRevoke, req.Key, req.RequestID, &res, &err)
	fp := backendkit.Fingerprint(req)
	return b.holder(ctx, holderChange{
		op: protocol.OpRevoke, key: req.Key, requestID: req.RequestID, fp: fp,
		check: func(cur *protocol.Lease, live bool) protocol.Status {
			return backendkit.CheckRevoke(cur, req.Token, judgeAt(cur, live))
		},
		lives: func(cur protocol.Lease) []time.Duration { return []time.Duration{cur.LockDelay} },
		apply: func(cur protocol.Lease, _ keyState, in instant, ids []clientv3.LeaseID) holderWrite {
			w := b.removal(cur, backendkit.NewRecorded(in.now, protocol.OpRevoke, protocol.StatusRevoked, cur,
				req.RequestID, fp, req.Actor, req.Reason))
			// The lease's lock-delay starts now: the key stays taken until
			// it passes (judged like expiry, by the cluster).
			ended := cur
			ended.ExpiresAt = in.now
			w.ops = append(w.ops, b.delayPut(ended, ids[0])...)
			return w
		},
	})
}

// removal is the write of a release or revoke of cur recorded as rec: the
// lease's owner, renewal and liveness entries go (its lock-delay entry is
// the caller's).
func (b *Backend) removal(cur protocol.Lease, rec backendkit.Recorded) holderWrite {
	base := b.keys.lease(cur.Key)
	return holderWrite{
		ops: []clientv3.Op{clientv3.OpDelete(base + suffixO[1:]), clientv3.OpDelete(base + suffixR[1:]),
			clientv3.OpDelete(base + suffixE[1:])},
		lease:  cur,
		rec:    rec,
		status: rec.Status,
		after:  func(int64) keyState { return keyState{} },
	}
}

// RenewMany renews reqs as Renew would, each in its own transaction; the
// transactions of different keys are sent together (over one connection
// they cost about one round trip), those of one key one after the other in
// the order given. It implements [protocol.BulkRenewer]: each request has
// its own outcome, and one that the cluster could not answer (a timeout, a
// key that kept changing, a record this release does not read) is answered
// by its error ([backendkit.Unanswered]) while the others, its key's later
// ones too, still go. It returns an error (and no results) only when it
// could answer none: the backend or its client was closed, ctx had ended,
// or every renewal failed (the first one's error).
// An invalid request answers invalid in its result, unsent, as the
// runtime answers it ([backendkit.RenewMany]).
func (b *Backend) RenewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	return backendkit.RenewMany(reqs, func(reqs []protocol.RenewRequest) ([]protocol.Result, error) {
		return b.renewValid(ctx, reqs)
	})
}

// renewValid is RenewMany of valid requests.
func (b *Backend) renewValid(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	if err := b.open(protocol.OpRenew); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, b.interpret(ctx, protocol.OpRenew, err)
	}
	byKey := map[protocol.Key][]int{}
	var order []protocol.Key
	for i, r := range reqs {
		if _, ok := byKey[r.Key]; !ok {
			order = append(order, r.Key)
		}
		byKey[r.Key] = append(byKey[r.Key], i)
	}
	out := make([]protocol.Result, len(reqs))
	errs := make([]error, len(reqs))
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, k := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, i := range byKey[k] {
				res, err := b.holder(ctx, b.renewChange(reqs[i]))
				if err != nil {
					res, errs[i] = backendkit.Unanswered(err), err
				}
				out[i] = res
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return out, nil
		}
	}
	if len(errs) > 0 {
		return nil, errs[0] // none answered: the call fails as a whole
	}
	return out, nil
}

// Get returns the live lease at req.Key (found) or not_found, read at one
// revision; not_found carries the ended lease (from the d entry) while its
// lock-delay keeps the key, judged as acquire judges it.
func (b *Backend) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if res, err := backendkit.RefuseGet(req); err != nil {
		return res, err
	}
	if err := b.open(protocol.OpGet); err != nil {
		return protocol.Result{}, err
	}
	resp, err := b.kv.Txn(ctx).Then(b.entryGets(req.Key)...).Commit()
	if err != nil {
		return protocol.Result{}, b.interpret(ctx, protocol.OpGet, err)
	}
	in := b.instant()
	st := b.stateOf(entriesIn(resp.Responses))
	cur, live, err := b.leaseOf(protocol.OpGet, req.Key, st, in)
	if err != nil {
		return protocol.Result{}, err
	}
	b.cache.put(req.Key, st)
	if live {
		// Past its expires_at by the clock, say so rather than "held
		// until" (the cluster sees expiry late, never early).
		return protocol.Result{Status: protocol.StatusFound, Lease: cur, Message: backendkit.ExpiredMessage(*cur, in.now)}, nil
	}
	ended, err := b.delayed(protocol.OpGet, req.Key, st, in)
	switch {
	case err != nil:
		return protocol.Result{}, err
	case ended == nil:
		return protocol.Result{Status: protocol.StatusNotFound}, nil
	}
	return backendkit.Delayed(ended, in.now), nil
}
