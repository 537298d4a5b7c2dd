// Package brokenstore wraps the in-memory backend in broken backends, FOR
// TESTS OF THE CHECKERS ONLY: each [Kind] bends one guarantee of DESIGN.md,
// so that a test can show that the contract suite, or the lincheck workload
// and model, fails on a store that breaks it ("a guarantee is a test that
// can fail"). [Correct] bends nothing: the checkers must pass it, which
// shows that the wrapping alone breaks nothing.
//
// Every handle of one [Store] shares the wrapper's state, and the wrapper
// runs one operation at a time over all of them, so that what it bends it
// bends consistently across handles.
package brokenstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Kind is the one guarantee a [Store] bends.
type Kind string

// The breakages.
const (
	Correct             Kind = "correct"
	ReissueAfterRelease Kind = "token reissued after release"      // an acquire after a release issues the released lease's token again
	ReissueAfterExpiry  Kind = "token reissued after expiry"       // an acquire over an expired lease issues its token again
	ReissueAfterRevoke  Kind = "token reissued after revoke"       // an acquire after a revoke issues the revoked lease's token again
	DoubleGrant         Kind = "acquire over a live lease"         // an acquire that meets another's live lease takes the key anyway
	RenewAfterExpiry    Kind = "renew succeeds after expiry"       // a renew of an expired lease answers renewed (nothing changes)
	StaleRelease        Kind = "release by a stale token"          // a release with a stale token deletes the newer lease and answers released
	ReplayCurrent       Kind = "replay answers the current row"    // a replay carries the key's current lease, not the first outcome's
	ReusedIDRuns        Kind = "reused request id runs"            // a request id reused with other parameters runs as a new request
	LockDelayIgnored    Kind = "lock-delay ignored"                // the lock-delay is shown but not kept
	LockDelayTooLong    Kind = "lock-delay kept too long"          // the key stays kept for twice the lock-delay
	EarlyExpiry         Kind = "expiry judged early"               // expiry judged by a clock Skew ahead of the store's
	AuditMissing        Kind = "audit record missing"              // a release writes no audit record
	AuditForRefusal     Kind = "audit record for a refusal"        // a refused release writes a released record
	AuditWrongToken     Kind = "audit record with the wrong token" // an acquire's record carries the token before its own
	ListExpired         Kind = "list shows expired leases"         // list includes expired leases without include_expired
	TimeoutRunsTwice    Kind = "timeout then runs again"           // a change answers timeout after taking effect, and its retry runs it again
	SilentRevoke        Kind = "revoke not signalled"              // Subscribe never signals a revoke
	UncommittedRelease  Kind = "release answered, not committed"   // a release answers released from a batch that did not commit
)

// Kinds lists every breakage (not [Correct]).
var Kinds = []Kind{ReissueAfterRelease, ReissueAfterExpiry, ReissueAfterRevoke, DoubleGrant, RenewAfterExpiry,
	StaleRelease, ReplayCurrent, ReusedIDRuns, LockDelayIgnored, LockDelayTooLong, EarlyExpiry, AuditMissing,
	AuditForRefusal, AuditWrongToken, ListExpired, TimeoutRunsTwice, SilentRevoke, UncommittedRelease}

// Config configures a [Store].
type Config struct {
	// Now is the store's clock (memstore's Config.Now). Default: time.Now.
	Now func() time.Time
	// Every bends only every Every-th occasion (1: every one). Default: 1.
	Every int
	// Skew is how far ahead EarlyExpiry's clock runs. Default: 1 µs, the
	// store's precision.
	Skew time.Duration
}

// Store is a memstore.Store behind a breakage.
type Store struct {
	kind  Kind
	mem   *memstore.Store
	now   func() time.Time
	every int
	skew  time.Duration

	mu    sync.Mutex // one operation at a time, over every handle
	n     int        // occasions seen
	keys  map[protocol.Key]*keyState
	seen  map[string]bool // request ids seen (TimeoutRunsTwice)
	extra []extraRecord   // AuditForRefusal
}

// keyState is what the wrapper knows of one key.
type keyState struct {
	last    protocol.Lease // the last lease acquired or renewed (tokens as presented)
	has     bool
	ended   protocol.Status // released or revoked when the last lease ended so; "" otherwise
	endedAt time.Time
	delta   int64           // tokens presented = real - delta (reissue kinds)
	present map[int64]int64 // real token -> presented, for tokens issued with another delta
	delays  map[int64]time.Duration
}

// extraRecord is a record the wrapper adds after the store's first n records.
type extraRecord struct {
	after int
	rec   audit.Record
}

// New returns a store that bends kind.
func New(kind Kind, cfg *Config) *Store {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Every <= 0 {
		c.Every = 1
	}
	if c.Skew <= 0 {
		c.Skew = time.Microsecond
	}
	return &Store{kind: kind, mem: memstore.NewStore(&memstore.Config{Now: c.Now}), now: c.Now, every: c.Every, skew: c.Skew,
		keys: map[protocol.Key]*keyState{}, seen: map[string]bool{}}
}

// Handle returns a new handle on s.
func (s *Store) Handle() *Handle { return &Handle{Backend: s.mem.Handle(), s: s} }

// Handle is one handle on a [Store]: a memstore handle whose operations the
// breakage bends. It implements what memstore's handles do.
type Handle struct {
	*memstore.Backend
	s *Store
}

var (
	_ protocol.Backend     = (*Handle)(nil)
	_ protocol.BulkRenewer = (*Handle)(nil)
	_ protocol.Notifier    = (*Handle)(nil)
	_ audit.Reader         = (*Handle)(nil)
)

// Name returns "broken".
func (h *Handle) Name() string { return "broken" }

// occasion reports whether this occasion of the breakage is bent.
func (s *Store) occasion() bool {
	s.n++
	return s.n%s.every == 0
}

func (s *Store) key(k protocol.Key) *keyState {
	ks := s.keys[k]
	if ks == nil {
		ks = &keyState{present: map[int64]int64{}, delays: map[int64]time.Duration{}}
		s.keys[k] = ks
	}
	return ks
}

func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// presented maps a real token of key k to the one the wrapper shows.
func (ks *keyState) presented(real int64) int64 {
	if p, ok := ks.present[real]; ok {
		return p
	}
	return real - ks.delta
}

// out rewrites a lease the store answered into the one the wrapper shows.
func (s *Store) out(l *protocol.Lease) *protocol.Lease {
	if l == nil {
		return nil
	}
	c := *l
	ks := s.key(l.Key)
	c.Token = ks.presented(l.Token)
	if d, ok := ks.delays[l.Token]; ok && s.kind == LockDelayIgnored {
		c.LockDelay = d
	}
	return &c
}

// realToken maps a token a client names to the store's.
func (s *Store) realToken(k protocol.Key, t int64) int64 {
	if t == 0 {
		return 0
	}
	return t + s.key(k).delta
}

// raw returns the live lease at k as the store has it, or nil (also
// while a lock-delay keeps the key: get's not_found then carries the ended
// lease, which is not live).
func (h *Handle) raw(ctx context.Context, k protocol.Key) (*protocol.Lease, error) {
	res, err := h.Backend.Get(ctx, protocol.GetRequest{Key: k, RequestID: protocol.NewRequestID()})
	if err != nil || res.Status != protocol.StatusFound {
		return nil, err
	}
	return res.Lease, nil
}

// timeoutTwice runs a change under another request id and answers timeout
// the first time a request id is seen, every Every-th time.
func (h *Handle) timeoutTwice(op protocol.Op, id string, run func(id string) (protocol.Result, error)) (protocol.Result, error, bool) {
	s := h.s
	if s.kind != TimeoutRunsTwice || s.seen[id] {
		return protocol.Result{}, nil, false
	}
	s.seen[id] = true
	if !s.occasion() {
		return protocol.Result{}, nil, false
	}
	if _, err := run(id + "#lost"); err != nil {
		return protocol.Result{}, err, true
	}
	return protocol.Result{}, backendkit.NewError(op, protocol.StatusTimeout, context.DeadlineExceeded, "brokenstore: took effect, answered timeout"), true
}

// reuse runs a request whose id the store refused as reused with other
// parameters (res and err, its answer) under a fresh id (ReusedIDRuns).
func (s *Store) reuse(res protocol.Result, err error, id string, run func(id string) (protocol.Result, error)) (protocol.Result, error) {
	if s.kind != ReusedIDRuns || res.Status != protocol.StatusInvalid || protocol.StatusOf(err) != protocol.StatusInvalid || !s.occasion() {
		return res, err
	}
	return run(fmt.Sprintf("%s#reuse-%d", id, s.n))
}

// replay rewrites a replayed result (ReplayCurrent).
func (h *Handle) replay(ctx context.Context, k protocol.Key, res protocol.Result) (protocol.Result, error) {
	if h.s.kind != ReplayCurrent || !res.Replayed || !h.s.occasion() {
		return res, nil
	}
	cur, err := h.raw(ctx, k)
	if err != nil {
		return protocol.Result{}, err
	}
	if cur != nil {
		res.Lease = cur
	}
	return res, nil
}

// Acquire takes the lease as memstore does, bent by the breakage.
func (h *Handle) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.key(req.Key)
	now := s.clock()
	run := func(id string) (protocol.Result, error) {
		r := req
		r.RequestID = id
		if s.kind == LockDelayIgnored {
			r.LockDelay, r.DefaultLockDelay = 0, 0
		}
		return h.Backend.Acquire(ctx, r)
	}
	if res, err, done := h.timeoutTwice(protocol.OpAcquire, req.RequestID, run); done {
		if err == nil || protocol.StatusOf(err) == protocol.StatusTimeout {
			s.acquired(req, protocol.Result{})
		}
		return res, err
	}
	if s.kind == LockDelayTooLong && ks.has && ks.last.LockDelay > 0 && ks.ended != protocol.StatusReleased {
		end := ks.last.ExpiresAt
		if ks.ended == protocol.StatusRevoked {
			end = ks.endedAt
		}
		if !now.Before(end) && now.Before(end.Add(2*ks.last.LockDelay)) && s.occasion() {
			l := ks.last
			l.ExpiresAt = end
			return protocol.Result{Status: protocol.StatusConflict, Lease: &l}, nil
		}
	}
	res, err := run(req.RequestID)
	if res, err = s.reuse(res, err, req.RequestID, run); err != nil {
		return res, err
	}
	if res.Status == protocol.StatusConflict && res.Lease != nil && res.Lease.Owner != req.Owner && res.Lease.LiveAt(now) {
		steal := s.kind == DoubleGrant || (s.kind == EarlyExpiry && !res.Lease.LiveAt(now.Add(s.skew)))
		if steal && s.occasion() {
			if _, err := h.Backend.Revoke(ctx, protocol.RevokeRequest{Key: req.Key, Token: res.Lease.Token, Actor: "brokenstore",
				Reason: string(s.kind), RequestID: req.RequestID + "#steal"}); err != nil {
				return protocol.Result{}, err
			}
			if res, err = run(req.RequestID); err != nil {
				return res, err
			}
		}
	}
	if res, err = h.replay(ctx, req.Key, res); err != nil {
		return res, err
	}
	if res.Status == protocol.StatusAcquired && !res.Replayed {
		s.acquired(req, res)
	}
	res.Lease = s.out(res.Lease)
	return res, nil
}

// acquired learns of an acquire that took effect; res is empty when it is
// not known (TimeoutRunsTwice).
func (s *Store) acquired(req protocol.AcquireRequest, res protocol.Result) {
	ks := s.key(req.Key)
	if res.Lease == nil {
		ks.has = false
		return
	}
	real := res.Lease.Token
	if s.kind == LockDelayIgnored && req.StoredLockDelay() > 0 {
		ks.delays[real] = req.StoredLockDelay()
	}
	cause := ks.ended
	if cause == "" && ks.has {
		cause = protocol.StatusExpired
	}
	reissue := ks.has && ((s.kind == ReissueAfterRelease && cause == protocol.StatusReleased) ||
		(s.kind == ReissueAfterExpiry && cause == protocol.StatusExpired) ||
		(s.kind == ReissueAfterRevoke && cause == protocol.StatusRevoked))
	if reissue && s.occasion() {
		ks.delta = real - ks.last.Token
		ks.present[real] = ks.last.Token
	}
	ks.last, ks.has, ks.ended = *s.out(res.Lease), true, ""
	ks.last.Key = req.Key
}

// renewed learns of a renew that took effect.
func (s *Store) renewed(res protocol.Result) {
	if res.Status != protocol.StatusRenewed || res.Replayed || res.Lease == nil {
		return
	}
	ks := s.key(res.Lease.Key)
	if ks.has && ks.last.Token == res.Lease.Token {
		ks.last = *res.Lease
	}
}

// Renew renews as memstore does, bent by the breakage.
func (h *Handle) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := h.renew(ctx, req)
	if err == nil {
		s.renewed(res)
	}
	return res, err
}

// RenewMany renews each valid request as Renew does, answering the others
// invalid as memstore does.
func (h *Handle) RenewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	return backendkit.RenewMany(reqs, func(reqs []protocol.RenewRequest) ([]protocol.Result, error) {
		s := h.s
		s.mu.Lock()
		defer s.mu.Unlock()
		out := make([]protocol.Result, len(reqs))
		for i, req := range reqs {
			res, err := h.renew(ctx, req)
			if protocol.StatusOf(err) == protocol.StatusInvalid {
				out[i] = res // a reused request id: answered in its result, as memstore does
				continue
			}
			if err != nil {
				return nil, err
			}
			s.renewed(res)
			out[i] = res
		}
		return out, nil
	})
}

func (h *Handle) renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	s := h.s
	now := s.clock()
	run := func(id string) (protocol.Result, error) {
		r := req
		r.RequestID, r.Token = id, s.realToken(req.Key, req.Token)
		return h.Backend.Renew(ctx, r)
	}
	if res, err, done := h.timeoutTwice(protocol.OpRenew, req.RequestID, run); done {
		return res, err
	}
	if early, err := h.early(ctx, req.Key, req.Owner, req.Token, now); err != nil || early != nil {
		return *early, err
	}
	res, err := run(req.RequestID)
	if res, err = s.reuse(res, err, req.RequestID, run); err != nil {
		return res, err
	}
	if s.kind == RenewAfterExpiry && res.Status == protocol.StatusExpired && res.Lease != nil && s.occasion() {
		l := *res.Lease
		ttl := req.TTL
		if ttl == 0 {
			ttl = l.ExpiresAt.Sub(l.RenewedAt)
		}
		l.RenewedAt, l.ExpiresAt = now, now.Add(ttl).Truncate(time.Microsecond)
		res = protocol.Result{Status: protocol.StatusRenewed, Lease: &l}
	}
	if res, err = h.replay(ctx, req.Key, res); err != nil {
		return res, err
	}
	res.Lease = s.out(res.Lease)
	return res, nil
}

// early answers expired for a holder's renew or release of a live lease
// that a clock Skew ahead judges expired (EarlyExpiry); nil otherwise.
func (h *Handle) early(ctx context.Context, k protocol.Key, owner string, token int64, now time.Time) (*protocol.Result, error) {
	if h.s.kind != EarlyExpiry {
		return nil, nil
	}
	cur, err := h.raw(ctx, k)
	if err != nil {
		return &protocol.Result{}, err
	}
	if cur == nil || cur.Owner != owner || cur.Token != token || cur.LiveAt(now.Add(h.s.skew)) || !h.s.occasion() {
		return nil, nil
	}
	return &protocol.Result{Status: protocol.StatusExpired, Lease: cur}, nil
}

// Release releases as memstore does, bent by the breakage.
func (h *Handle) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	run := func(id string) (protocol.Result, error) {
		r := req
		r.RequestID, r.Token = id, s.realToken(req.Key, req.Token)
		return h.Backend.Release(ctx, r)
	}
	res, err, done := h.timeoutTwice(protocol.OpRelease, req.RequestID, run)
	if !done {
		res, err = h.release(ctx, req, now, run)
	}
	if s.kind != UncommittedRelease { // whose answer may not have taken effect
		s.ended(req.Key, protocol.StatusReleased, res, err, now)
	}
	return res, err
}

func (h *Handle) release(ctx context.Context, req protocol.ReleaseRequest, now time.Time, run func(string) (protocol.Result, error)) (protocol.Result, error) {
	s := h.s
	if early, err := h.early(ctx, req.Key, req.Owner, req.Token, now); err != nil || early != nil {
		return *early, err
	}
	if s.kind == UncommittedRelease {
		cur, err := h.raw(ctx, req.Key)
		if err != nil {
			return protocol.Result{}, err
		}
		if cur != nil && cur.Owner == req.Owner && cur.Token == s.realToken(req.Key, req.Token) && s.occasion() {
			return protocol.Result{Status: protocol.StatusReleased, Lease: s.out(cur)}, nil
		}
	}
	res, err := run(req.RequestID)
	if res, err = s.reuse(res, err, req.RequestID, run); err != nil {
		return res, err
	}
	switch {
	case s.kind == StaleRelease && res.Status == protocol.StatusStaleToken && res.Lease != nil && s.occasion():
		rv, err := h.Backend.Revoke(ctx, protocol.RevokeRequest{Key: req.Key, Token: res.Lease.Token, Actor: req.Owner,
			Reason: string(s.kind), RequestID: req.RequestID + "#stale"})
		if err != nil {
			return rv, err
		}
		if rv.Status == protocol.StatusRevoked {
			res = protocol.Result{Status: protocol.StatusReleased, Lease: rv.Lease}
		}
	case s.kind == AuditForRefusal && !res.Replayed && (res.Status == protocol.StatusStaleToken ||
		res.Status == protocol.StatusNotOwner || res.Status == protocol.StatusExpired) && s.occasion():
		l := protocol.Lease{Key: req.Key, Owner: req.Owner, Token: req.Token, AcquiredAt: now, RenewedAt: now, ExpiresAt: now,
			Version: protocol.LeaseFormatVersion}
		rec := backendkit.NewRecorded(now, protocol.OpRelease, protocol.StatusReleased, l, req.RequestID, "", req.Owner, "").Record
		n, err := h.count(ctx)
		if err != nil {
			return protocol.Result{}, err
		}
		s.extra = append(s.extra, extraRecord{after: n, rec: rec})
	}
	if res, err = h.replay(ctx, req.Key, res); err != nil {
		return res, err
	}
	res.Lease = s.out(res.Lease)
	return res, nil
}

// ended learns that the lease at k ended by st (released or revoked) at
// now, when the change answered so or answered timeout having taken effect.
func (s *Store) ended(k protocol.Key, st protocol.Status, res protocol.Result, err error, now time.Time) {
	if (err == nil && res.Status == st && !res.Replayed) || protocol.StatusOf(err) == protocol.StatusTimeout {
		ks := s.key(k)
		ks.ended, ks.endedAt = st, now
	}
}

// Revoke revokes as memstore does, bent by the breakage.
func (h *Handle) Revoke(ctx context.Context, req protocol.RevokeRequest) (protocol.Result, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	run := func(id string) (protocol.Result, error) {
		r := req
		r.RequestID, r.Token = id, s.realToken(req.Key, req.Token)
		return h.Backend.Revoke(ctx, r)
	}
	res, err, done := h.timeoutTwice(protocol.OpRevoke, req.RequestID, run)
	if !done {
		res, err = run(req.RequestID)
		if res, err = s.reuse(res, err, req.RequestID, run); err == nil {
			res, err = h.replay(ctx, req.Key, res)
		}
	}
	s.ended(req.Key, protocol.StatusRevoked, res, err, now)
	res.Lease = s.out(res.Lease)
	return res, err
}

// Get reads as memstore does, bent by the breakage.
func (h *Handle) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	res, err := h.Backend.Get(ctx, req)
	if err != nil {
		return res, err
	}
	if s.kind == EarlyExpiry && res.Status == protocol.StatusFound && res.Lease != nil && !res.Lease.LiveAt(now.Add(s.skew)) && s.occasion() {
		return protocol.Result{Status: protocol.StatusNotFound}, nil
	}
	res.Lease = s.out(res.Lease)
	return res, nil
}

// List lists as memstore does, bent by the breakage.
func (h *Handle) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == ListExpired && !req.IncludeExpired && s.occasion() {
		req.IncludeExpired = true
	}
	res, err := h.Backend.List(ctx, req)
	for i := range res.Leases {
		res.Leases[i] = *s.out(&res.Leases[i])
	}
	return res, err
}

// count returns how many records the store's trail holds.
func (h *Handle) count(ctx context.Context) (int, error) {
	p, err := h.Backend.ReadAudit(ctx, audit.Query{Newest: true, Limit: 1})
	if err != nil || len(p.Records) == 0 {
		return 0, err
	}
	return int(p.Records[0].ID), nil
}

// ReadAudit reads the trail as memstore does, bent by the breakage.
func (h *Handle) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind != AuditForRefusal || len(s.extra) == 0 {
		p, err := h.Backend.ReadAudit(ctx, q)
		return s.bendRecords(p), err
	}
	if err := q.Validate(); err != nil {
		return h.Backend.ReadAudit(ctx, q) // answers invalid
	}
	// The store's whole trail with the extra records merged in, numbered
	// anew: the numbering is stable, as extra records are only appended.
	var all []audit.Record
	for cursor := ""; ; {
		p, err := h.Backend.ReadAudit(ctx, audit.Query{Limit: audit.MaxLimit, Cursor: cursor})
		if err != nil {
			return audit.Page{}, err
		}
		all = append(all, s.bendRecords(p).Records...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	var merged []audit.Record
	x := 0
	for i := 0; i <= len(all); i++ {
		for x < len(s.extra) && s.extra[x].after <= i {
			merged = append(merged, s.extra[x].rec)
			x++
		}
		if i < len(all) {
			merged = append(merged, all[i])
		}
	}
	for i := range merged {
		merged[i].ID = int64(i) + 1
	}
	after, before, _ := q.IDRange()
	var rows []audit.Record
	limit := q.EffectiveLimit()
	order := merged
	if q.Newest {
		order = slices.Clone(merged)
		slices.Reverse(order)
	}
	for _, r := range order {
		if r.ID <= after || r.ID >= before || !q.Matches(r) {
			continue
		}
		if rows = append(rows, r); len(rows) > limit {
			break
		}
	}
	return backendkit.AuditPage(rows, q), nil
}

// bendRecords applies the audit breakages that change or drop the store's
// own records, and shows tokens as presented.
func (s *Store) bendRecords(p audit.Page) audit.Page {
	recs := p.Records[:0:0]
	for _, r := range p.Records {
		k := protocol.Key{Namespace: r.Namespace, Name: r.Key}
		if r.Token != 0 && r.Op != "prune" {
			r.Token = s.key(k).presented(r.Token)
		}
		switch {
		case s.kind == AuditMissing && r.Op == protocol.OpRelease:
			continue
		case s.kind == AuditWrongToken && r.Op == protocol.OpAcquire:
			r.Token--
		}
		recs = append(recs, r)
	}
	p.Records = recs
	return p
}

// Subscribe subscribes as memstore does; SilentRevoke drops the signals of
// revokes (the key's newest record, read when the signal comes, is one).
func (h *Handle) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	ch, cancel, err := h.Backend.Subscribe(ctx, key)
	if err != nil || h.s.kind != SilentRevoke {
		return ch, cancel, err
	}
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			close(done)
		})
	}
	go func() {
		for {
			select {
			case <-done:
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
			}
			p, err := h.Backend.ReadAudit(context.Background(), audit.Query{Namespace: key.Namespace, Key: key.Name, Newest: true, Limit: 1})
			if err == nil && len(p.Records) == 1 && p.Records[0].Op == protocol.OpRevoke {
				continue // the revoke is not signalled
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, stop, nil
}

// ErrUnknownKind is returned by [Parse] for a name no Kind has.
var ErrUnknownKind = errors.New("brokenstore: unknown kind")

// Parse returns the Kind named name.
func Parse(name string) (Kind, error) {
	if Kind(name) == Correct || slices.Contains(Kinds, Kind(name)) {
		return Kind(name), nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownKind, name)
}
