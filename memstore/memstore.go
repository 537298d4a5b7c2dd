// Package memstore is an in-memory, deterministic [protocol.Backend] FOR
// UNIT TESTS ONLY: nothing is persisted, and the state lives in one process.
// Use it to test code that depends on [protocol.Store] without a database:
//
//	rt := protocol.New(memstore.New(nil), nil)
//	defer rt.Close(ctx)
//
// It implements the whole protocol as the SQL backends do (DESIGN.md):
// fencing tokens from one counter per store, expiry judged by the store's
// clock, idempotency by (namespace, request id) with a parameters hash and
// replay, one audit record per state change, list with keyset pagination,
// and [audit.Reader], and it wakes blocking acquires ([protocol.Notifier])
// in-process. Because the store writes and reads its own values, the
// format-version checks of the SQL backends have nothing to refuse here.
//
// A [Store] holds the state; each [Store.Handle] is an independent
// [*Backend] on it, as a second process's connection would be, so tests of
// contention can use two handles. This package must not import any database
// driver or any package under sqlstore/.
package memstore

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// Config tunes a [Store]. A nil *Config means all defaults.
type Config struct {
	// Now is the store's clock, FOR TESTS ONLY: it judges expiry and stamps
	// leases and audit records. It is called with the store's lock held, so
	// it must not call back into the store. Readings are truncated to the
	// microsecond, the precision of the SQL backends. Default: time.Now.
	Now func() time.Time
}

// Store is the shared in-memory state of one lease store: leases, the
// fencing counter and the audit trail. Obtain handles on it with
// [Store.Handle]. A Store is safe for concurrent use; every operation runs
// under one mutex, so each check and change and its audit record form one
// atomic step.
type Store struct {
	now func() time.Time

	mu        sync.Mutex
	leases    map[protocol.Key]protocol.Lease
	lastToken int64                 // the last fencing token issued, for every key
	records   []backendkit.Recorded // the audit trail; records[i].ID == i+1
	requests  map[requestKey]int    // (namespace, request id) -> index into records
	// delayed holds, per key, the lease last revoked with a lock-delay,
	// ExpiresAt set to the revoke's time, until an acquire takes the key.
	delayed map[protocol.Key]protocol.Lease

	waiters waiters // subscribers to released and revoked keys (notify.go)
}

type requestKey struct{ namespace, requestID string }

// NewStore returns an empty store. cfg may be nil.
func NewStore(cfg *Config) *Store {
	s := &Store{
		now:      time.Now,
		leases:   make(map[protocol.Key]protocol.Lease),
		requests: make(map[requestKey]int),
		delayed:  make(map[protocol.Key]protocol.Lease),
	}
	if cfg != nil && cfg.Now != nil {
		s.now = cfg.Now
	}
	return s
}

// Handle returns a new open handle on s. Handles are independent: closing
// one leaves the others and the store's state untouched.
func (s *Store) Handle() *Backend { return &Backend{store: s} }

// New returns a handle on a new, empty store: NewStore(cfg).Handle().
func New(cfg *Config) *Backend { return NewStore(cfg).Handle() }

// Backend is one handle on a [Store]. It implements [protocol.Backend] and
// [audit.Reader] and is safe for concurrent use. After [Backend.Close] every
// operation on this handle returns an *[protocol.Error] with status closed.
type Backend struct {
	store  *Store
	closed atomic.Bool
}

var (
	_ protocol.Backend     = (*Backend)(nil)
	_ protocol.BulkRenewer = (*Backend)(nil)
	_ audit.Reader         = (*Backend)(nil)
)

// errHandleClosed is the cause of every error of a closed handle.
var errHandleClosed = errors.New("memstore: handle closed")

// interpretError is the one place where this backend builds its errors: a
// closed handle answers closed, a finished context timeout, and an invalid
// audit query invalid.
func interpretError(op protocol.Op, err error) error {
	var invalid *invalidError
	switch {
	case errors.Is(err, errHandleClosed):
		return backendkit.NewError(op, protocol.StatusClosed, err, "memstore: the handle was closed")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return backendkit.NewError(op, protocol.StatusTimeout, err, "memstore: the operation was interrupted")
	case errors.As(err, &invalid):
		return backendkit.NewError(op, protocol.StatusInvalid, invalid.err, "memstore: bad audit query")
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "memstore")
}

type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }

// Name returns "memory".
func (b *Backend) Name() string { return "memory" }

// lock checks that the handle is open and ctx is not done, takes the store's
// lock and reads the clock. On success the caller must call s.mu.Unlock.
func (b *Backend) lock(ctx context.Context, op protocol.Op) (*Store, time.Time, error) {
	if b.closed.Load() {
		return nil, time.Time{}, interpretError(op, errHandleClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, interpretError(op, err)
	}
	s := b.store
	s.mu.Lock()
	return s, s.now().UTC().Truncate(time.Microsecond), nil
}

// expiry returns now+ttl at the store's microsecond precision.
func expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Microsecond)
}

// current returns a copy of the row at k, or nil when there is none.
func (s *Store) current(k protocol.Key) *protocol.Lease {
	l, ok := s.leases[k]
	if !ok {
		return nil
	}
	return &l
}

// replay looks up (namespace, request id). It reports done when the id was
// used before: res is then the recorded outcome flagged Replayed, or invalid
// when the id was used with another operation or other parameters.
func (s *Store) replay(op protocol.Op, namespace, requestID, paramsHash string) (res protocol.Result, done bool) {
	rec, ok := s.prior(namespace, requestID)
	if !ok {
		return protocol.Result{}, false
	}
	return backendkit.Replay(rec, op, paramsHash), true
}

// prior returns the record of (namespace, request id), if it was used.
func (s *Store) prior(namespace, requestID string) (backendkit.Recorded, bool) {
	i, ok := s.requests[requestKey{namespace, requestID}]
	if !ok {
		return backendkit.Recorded{}, false
	}
	return s.records[i], true
}

// change is one state change to record in the audit trail.
type change struct {
	op         protocol.Op
	status     protocol.Status
	lease      protocol.Lease
	requestID  string
	actor      string
	reason     string
	paramsHash string
}

// record appends the audit record of c at now.
func (s *Store) record(now time.Time, c change) {
	r := backendkit.NewRecorded(now, c.op, c.status, c.lease, c.requestID, c.paramsHash, c.actor, c.reason)
	r.ID = int64(len(s.records)) + 1
	s.requests[requestKey{r.Namespace, r.RequestID}] = len(s.records)
	s.records = append(s.records, r)
}

// Acquire takes the lease on req.Key when it is free or expired, with a
// token greater than every token the store issued, and records it.
func (b *Backend) Acquire(ctx context.Context, req protocol.AcquireRequest) (res protocol.Result, err error) {
	if res, err := backendkit.RefuseAcquire(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpAcquire, req.Key, req.RequestID, &res, &err)
	s, now, err := b.lock(ctx, protocol.OpAcquire)
	if err != nil {
		return protocol.Result{}, err
	}
	defer s.mu.Unlock()
	hash := backendkit.Fingerprint(req)
	if rec, ok := s.prior(req.Key.Namespace, req.RequestID); ok {
		return backendkit.ReplayAcquire(rec, req), nil
	}
	cur := s.current(req.Key)
	if d, ok := s.delayed[req.Key]; ok && cur == nil {
		cur = &d
	}
	if st := backendkit.CheckAcquire(cur, now); st != "" {
		return backendkit.Conflict(cur, now), nil
	}
	s.lastToken++
	l := protocol.Lease{
		Key:        req.Key,
		Owner:      req.Owner,
		Token:      s.lastToken,
		AcquiredAt: now,
		RenewedAt:  now,
		ExpiresAt:  expiry(now, req.TTL),
		Version:    protocol.LeaseFormatVersion,
		LockDelay:  req.StoredLockDelay(),
	}
	s.leases[req.Key] = l
	delete(s.delayed, req.Key)
	s.record(now, change{op: protocol.OpAcquire, status: protocol.StatusAcquired, lease: l,
		requestID: req.RequestID, actor: req.Owner, paramsHash: hash})
	return protocol.Result{Status: protocol.StatusAcquired, Lease: &l}, nil
}

// Renew extends the holder's live lease to now+req.TTL, keeping its token.
func (b *Backend) Renew(ctx context.Context, req protocol.RenewRequest) (res protocol.Result, err error) {
	if res, err := backendkit.RefuseRenew(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRenew, req.Key, req.RequestID, &res, &err)
	s, now, err := b.lock(ctx, protocol.OpRenew)
	if err != nil {
		return protocol.Result{}, err
	}
	defer s.mu.Unlock()
	return s.renew(req, now), nil
}

// RenewMany renews reqs in order under one lock, at one instant (see
// [protocol.BulkRenewer]).
func (b *Backend) RenewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	return backendkit.RenewMany(reqs, func(reqs []protocol.RenewRequest) ([]protocol.Result, error) {
		s, now, err := b.lock(ctx, protocol.OpRenew)
		if err != nil {
			return nil, err
		}
		defer s.mu.Unlock()
		out := make([]protocol.Result, len(reqs))
		for i, req := range reqs {
			out[i] = s.renew(req, now)
		}
		return out, nil
	})
}

// renew is Renew with the store locked.
func (s *Store) renew(req protocol.RenewRequest, now time.Time) protocol.Result {
	hash := backendkit.Fingerprint(req)
	if res, done := s.replay(protocol.OpRenew, req.Key.Namespace, req.RequestID, hash); done {
		return res
	}
	cur := s.current(req.Key)
	if st := backendkit.CheckHolder(cur, req.Owner, req.Token, now); st != "" {
		return backendkit.Refused(st, cur)
	}
	l := *cur
	ttl := req.TTL
	if ttl == 0 {
		ttl = l.ExpiresAt.Sub(l.RenewedAt) // the lease's own
	}
	l.RenewedAt = now
	l.ExpiresAt = expiry(now, ttl)
	s.leases[req.Key] = l
	s.record(now, change{op: protocol.OpRenew, status: protocol.StatusRenewed, lease: l,
		requestID: req.RequestID, actor: req.Owner, paramsHash: hash})
	return protocol.Result{Status: protocol.StatusRenewed, Lease: &l}
}

// Release deletes the holder's live lease. The result carries the lease as
// it was.
func (b *Backend) Release(ctx context.Context, req protocol.ReleaseRequest) (res protocol.Result, err error) {
	if res, err := backendkit.RefuseRelease(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRelease, req.Key, req.RequestID, &res, &err)
	s, now, err := b.lock(ctx, protocol.OpRelease)
	if err != nil {
		return protocol.Result{}, err
	}
	defer s.mu.Unlock()
	hash := backendkit.Fingerprint(req)
	if res, done := s.replay(protocol.OpRelease, req.Key.Namespace, req.RequestID, hash); done {
		return res, nil
	}
	cur := s.current(req.Key)
	if st := backendkit.CheckHolder(cur, req.Owner, req.Token, now); st != "" {
		return backendkit.Refused(st, cur), nil
	}
	delete(s.leases, req.Key)
	s.record(now, change{op: protocol.OpRelease, status: protocol.StatusReleased, lease: *cur,
		requestID: req.RequestID, actor: req.Owner, paramsHash: hash})
	s.waiters.signal(req.Key, nil)
	return protocol.Result{Status: protocol.StatusReleased, Lease: cur}, nil
}

// Revoke deletes the live lease at req.Key (only the one with req.Token when
// it is non-zero) and records the actor and reason.
func (b *Backend) Revoke(ctx context.Context, req protocol.RevokeRequest) (res protocol.Result, err error) {
	if res, err := backendkit.RefuseRevoke(req); err != nil {
		return res, err
	}
	defer backendkit.AnswerReused(protocol.OpRevoke, req.Key, req.RequestID, &res, &err)
	s, now, err := b.lock(ctx, protocol.OpRevoke)
	if err != nil {
		return protocol.Result{}, err
	}
	defer s.mu.Unlock()
	hash := backendkit.Fingerprint(req)
	if res, done := s.replay(protocol.OpRevoke, req.Key.Namespace, req.RequestID, hash); done {
		return res, nil
	}
	cur := s.current(req.Key)
	if st := backendkit.CheckRevoke(cur, req.Token, now); st != "" {
		return backendkit.Refused(st, cur), nil
	}
	delete(s.leases, req.Key)
	if cur.LockDelay > 0 {
		d := *cur
		d.ExpiresAt = now
		s.delayed[req.Key] = d
	}
	s.record(now, change{op: protocol.OpRevoke, status: protocol.StatusRevoked, lease: *cur,
		requestID: req.RequestID, actor: req.Actor, reason: req.Reason, paramsHash: hash})
	s.waiters.signal(req.Key, nil)
	return protocol.Result{Status: protocol.StatusRevoked, Lease: cur}, nil
}

// Get returns the live lease at req.Key (found) or not_found, which
// carries the ended lease while its lock-delay keeps the key.
func (b *Backend) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	if res, err := backendkit.RefuseGet(req); err != nil {
		return res, err
	}
	s, now, err := b.lock(ctx, protocol.OpGet)
	if err != nil {
		return protocol.Result{}, err
	}
	defer s.mu.Unlock()
	var ended *protocol.Lease
	if d, ok := s.delayed[req.Key]; ok {
		ended = &d
	}
	return backendkit.Found(s.current(req.Key), ended, now), nil
}

// List returns one page of the namespace's leases ordered by name (byte
// order, as the SQL backends with the C collation).
func (b *Backend) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	if res, err := backendkit.RefuseList(req); err != nil {
		return res, err
	}
	after, limit, err := backendkit.ListStart(req)
	if err != nil {
		return protocol.ListResult{}, err
	}
	s, now, err := b.lock(ctx, protocol.OpList)
	if err != nil {
		return protocol.ListResult{}, err
	}
	defer s.mu.Unlock()
	var page []protocol.Lease
	for k, l := range s.leases {
		switch {
		case k.Namespace != req.Namespace,
			req.Cursor != "" && k.Name <= after,
			!strings.HasPrefix(k.Name, req.Prefix),
			req.Owner != "" && l.Owner != req.Owner,
			!req.IncludeExpired && !l.LiveAt(now):
			continue
		}
		page = append(page, l)
	}
	slices.SortFunc(page, func(x, y protocol.Lease) int { return cmp.Compare(x.Key.Name, y.Key.Name) })
	return backendkit.LeasePage(page, limit), nil
}

// ReadAudit returns one page of the audit trail, oldest first or, with
// q.Newest, newest first, filtered by q's namespace, key, since, ops and
// owner. An invalid q is an *[protocol.Error] with status invalid.
func (b *Backend) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	if err := q.Validate(); err != nil {
		return audit.Page{}, interpretError(protocol.OpAudit, &invalidError{err})
	}
	after, before, _ := q.IDRange() // checked by Validate
	s, _, err := b.lock(ctx, protocol.OpAudit)
	if err != nil {
		return audit.Page{}, err
	}
	defer s.mu.Unlock()
	if err := audit.CheckCursorEnd(q, int64(len(s.records))); err != nil {
		return audit.Page{}, err
	}
	limit := q.EffectiveLimit()
	// Record i has id i+1: ids after `after` and below `before` are the
	// indexes [lo, hi).
	lo, hi := int(min(after, int64(len(s.records)))), int(min(before-1, int64(len(s.records))))
	var rows []audit.Record
	for n := range hi - lo {
		i := lo + n
		if q.Newest {
			i = hi - 1 - n
		}
		if r := s.records[i].Record; q.Matches(r) {
			if rows = append(rows, r); len(rows) > limit {
				break
			}
		}
	}
	// A page that is not full passed over every record up to id hi.
	return backendkit.FollowPage(rows, q, int64(hi)), nil
}

// Health returns nil while the handle is open.
func (b *Backend) Health(ctx context.Context) error {
	s, _, err := b.lock(ctx, protocol.OpHealth)
	if err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Close closes this handle only: the store and its other handles are not
// affected. Close is idempotent and always returns nil.
func (b *Backend) Close(context.Context) error {
	b.closed.Store(true)
	b.store.waiters.signal(protocol.Key{}, b)
	return nil
}

var _ protocol.NamespaceLister = (*Backend)(nil)

// Namespaces returns up to limit namespaces holding a live lease, in byte
// order, after after (see [protocol.NamespaceLister]).
func (b *Backend) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	if err := backendkit.RefuseNamespaces(after, limit); err != nil {
		return nil, err
	}
	s, now, err := b.lock(ctx, protocol.OpNamespaces)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for k, l := range s.leases {
		if k.Namespace > after && !seen[k.Namespace] && l.LiveAt(now) {
			seen[k.Namespace] = true
			out = append(out, k.Namespace)
		}
	}
	slices.Sort(out)
	return out[:min(limit, len(out))], nil
}
