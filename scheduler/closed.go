package scheduler

import (
	"context"
	"fmt"

	"github.com/leasestore/leasestore/protocol"
)

// closeSensor returns store as the scheduler calls it: each call passed
// on, its answer made a Runtime's ([protocol.Answer]), and its error,
// when of status closed, given to closed as well. A
// Store that is a [protocol.Notifier] stays one (the watches of leases
// subscribe through it).
func closeSensor(store protocol.Store, closed func(err error)) protocol.Store {
	c := sensor{Store: store, closed: closed}
	if n, ok := store.(protocol.Notifier); ok {
		return notifyingSensor{sensor: c, n: n}
	}
	return c
}

// sensor is the scheduler's store (see closeSensor): every call of the
// Store interface the scheduler makes goes through a method of its own,
// which answers as a Runtime does ([protocol.Answer]): a backend used
// directly answers a refusal (conflict, not_found, ...) in its Result with
// a nil error, which the scheduler, judging errors, would take for a
// success.
type sensor struct {
	protocol.Store
	closed func(err error)
}

func (c sensor) note(err error) {
	if protocol.StatusOf(err) == protocol.StatusClosed {
		c.closed(err)
	}
}

func (c sensor) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := c.Store.Acquire(ctx, req)
	res, err = protocol.Answer(protocol.OpAcquire, req.Key, res, err)
	c.note(err)
	return res, err
}

func (c sensor) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := c.Store.Renew(ctx, req)
	res, err = protocol.Answer(protocol.OpRenew, req.Key, res, err)
	c.note(err)
	return res, err
}

func (c sensor) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	res, err := c.Store.Release(ctx, req)
	res, err = protocol.Answer(protocol.OpRelease, req.Key, res, err)
	c.note(err)
	return res, err
}

func (c sensor) Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error) {
	res, err := c.Store.Get(ctx, req)
	res, err = protocol.Answer(protocol.OpGet, req.Key, res, err)
	c.note(err)
	return res, err
}

func (c sensor) List(ctx context.Context, req protocol.ListRequest) (protocol.ListResult, error) {
	res, err := c.Store.List(ctx, req)
	c.note(err)
	return res, err
}

func (c sensor) Revoke(ctx context.Context, req protocol.RevokeRequest) (protocol.Result, error) {
	res, err := c.Store.Revoke(ctx, req)
	res, err = protocol.Answer(protocol.OpRevoke, req.Key, res, err)
	c.note(err)
	return res, err
}

func (c sensor) Health(ctx context.Context) error {
	err := c.Store.Health(ctx)
	c.note(err)
	return err
}

// notifyingSensor is a sensor over a store that signals released keys.
type notifyingSensor struct {
	sensor
	n protocol.Notifier
}

func (c notifyingSensor) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	ch, cancel, err := c.n.Subscribe(ctx, key)
	c.note(err)
	return ch, cancel, err
}

// closedStore reports whether a lease's watch (protocol.WatchLease) ended
// because the store answered closed. Its get went through the sensor,
// which noted that answer: the shutdown on it (closedShutdown) loses every
// lease and the membership, so the watch's report is left to it.
func closedStore(why error) bool { return protocol.StatusOf(why) == protocol.StatusClosed }

// noteClosed records the store's first answer of status closed, err, and
// ends Run's context: the round under way stops and Run shuts down as
// [Scheduler.closedShutdown] says.
func (s *Scheduler) noteClosed(err error) {
	s.mu.Lock()
	first := s.closedBy == nil
	if first {
		s.closedBy = err
	}
	s.mu.Unlock()
	if first {
		s.stop(err)
	}
}

// storeClosed returns the store's first answer of status closed, nil
// while none came.
func (s *Scheduler) storeClosed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closedBy
}

// closedShutdown ends Run once the store answered closed (why): it never
// answers again, so nothing is sent. Every lease still held or given up is
// lost (its handler cancelled, cause matching ErrLeaseLost and ErrClosed;
// EventLost), the membership too (EventMembershipLost); once every handler
// returned and every watch and renewal ended, it logs what it could not
// release (each lease runs out after its TTL) and returns Run's error.
func (s *Scheduler) closedShutdown(why error) error {
	s.stopping = true
	s.log.Warn("scheduler: the store was closed: it answers no more; losing every lease without a release and stopping", "err", why)
	lost := func(key protocol.Key) error { // why each lease is lost (loseLocked makes it a LeaseLost cause)
		return &protocol.Error{Status: protocol.StatusClosed, Key: key,
			Message: "the store was closed while the lease was held: it is renewed no more and runs out after its TTL"}
	}
	s.mu.Lock()
	s.dropBusyWatchesLocked(nil)
	// Whether the worker held, or may hold, anything the close strands.
	held := len(s.leases) > 0 || s.membership != nil || s.lapsed != 0 || len(s.pending) > 0 || s.memberReq != "" || len(s.orphans) > 0
	for _, l := range s.leases {
		s.loseLocked(l, lost(l.key), false)
		l.release = false // lost earlier by the local clock too: nothing can be sent
	}
	var memberTokens []int64 // tokens of membership leases that may live
	if m := s.membership; m != nil {
		memberTokens = append(memberTokens, m.token)
		s.log.Warn("scheduler: membership lease lost: the store was closed", "token", m.token)
		s.loseMembershipLocked(m, lost(s.member))
	}
	if s.lapsed != 0 {
		memberTokens = append(memberTokens, s.lapsed)
	}
	s.problem = "the store was closed: " + why.Error()
	s.mu.Unlock()
	for {
		s.settle(s.base) // forgets the leases whose handlers returned; releases none
		s.flush()
		s.mu.Lock()
		n := len(s.leases)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		<-s.wake // a handler returned
	}
	unreleased := s.takeUnreleased()
	held = held || len(unreleased) > 0
	for _, l := range unreleased {
		s.log.Warn("scheduler: a lease given up earlier was not released: the store was closed; it runs out after its TTL",
			"target", l.target, "token", l.token, "expires_at", l.expiresAt)
	}
	for t, id := range s.pending {
		s.orphan(protocol.Key{Namespace: s.set.ns, Name: t}, id)
	}
	clear(s.pending)
	if s.memberReq != "" {
		s.orphan(s.member, s.memberReq)
	}
	s.resolveOrphans(s.base) // each answers closed at once: logged, with when its lease may run out
	for _, token := range memberTokens {
		s.log.Warn("scheduler: the membership lease was not released: the store was closed; it runs out after its TTL", "token", token)
	}
	s.watches.Wait()
	s.waitRenewals()
	s.log.Info("scheduler: stopped: the store was closed")
	if !held {
		return fmt.Errorf("scheduler: the store was closed: the worker held no lease, so none was lost: %w", why)
	}
	return fmt.Errorf("scheduler: the store was closed while the worker ran: every lease was lost, none released (each runs out after its TTL): %w", why)
}
