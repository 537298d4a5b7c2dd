package scheduler

import "context"

// EventKind says what an [Event] reports. The values appear in metrics and
// logs.
type EventKind string

// The events a scheduler reports.
const (
	// EventAcquired: the worker took a target's lease and started its handler.
	EventAcquired EventKind = "acquired"
	// EventBusy: another worker took the target first (an acquire answered
	// conflict); the target is backed off.
	EventBusy EventKind = "busy"
	// EventLost: a lease was lost (the store signalled its end, a renewal
	// was refused, it was not renewed before it would run out, or the
	// store was closed: the cause then matches protocol.ErrClosed); its
	// handler's context was cancelled. It is sent when the handler is
	// cancelled, not at the end of the round.
	EventLost EventKind = "lost"
	// EventHandedOver: the worker gives a target up to rebalance (or because
	// it left the set, or at shutdown); its handler's context was cancelled.
	EventHandedOver EventKind = "handed_over"
	// EventReleased: a lease was released after its handler returned.
	EventReleased EventKind = "released"
	// EventRound: a round ended; the gauges are current.
	EventRound EventKind = "round"
	// EventMembershipLost: the worker's membership lease was lost (the
	// store signalled its end, a renewal was refused, or it was not
	// renewed before it would run out by the local clock): the worker no
	// longer counts itself a member, claims no target, and joins again at
	// once. Its target leases are kept. (When the store was closed, the
	// cause matches protocol.ErrClosed, and the worker stops instead: see
	// [Scheduler.Run].) Sent when the loss is heard, not
	// at the end of the round; Token is the membership lease's.
	EventMembershipLost EventKind = "membership_lost"
)

// Event is one thing a scheduler did, with its state right after it.
type Event struct {
	Kind      EventKind
	Worker    string // the scheduler's identity
	Namespace string // the targets' namespace
	Target    string // "" for a round and a membership loss
	Token     int64  // the lease's token (the membership lease's for membership_lost); 0 for busy and round
	Cause     error  // lost, handed_over, membership_lost: why (lost and membership_lost match protocol.ErrLeaseLost); nil otherwise

	Owned   int // targets held and worked on (not being given up)
	Share   int // the fair share at the last round
	Workers int // live workers known at the last round, this one while a member (see [Snapshot])
	Targets int // targets in the set at the last round
}

// Observer receives a scheduler's events, on the scheduler's goroutines
// (never with a lock held). Implementations must be safe for concurrent use
// and fast. promobserver.Observer implements it.
type Observer interface {
	ObserveScheduler(ctx context.Context, ev Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, ev Event)

// ObserveScheduler calls f.
func (f ObserverFunc) ObserveScheduler(ctx context.Context, ev Event) { f(ctx, ev) }
