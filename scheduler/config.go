package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// Defaults of [Config].
const (
	// DefaultNamespace is the namespace of the targets' leases.
	DefaultNamespace = "scheduler"
	// WorkersSuffix is appended to the targets' namespace to name the
	// workers' namespace by default ("scheduler.workers").
	WorkersSuffix = ".workers"
	// DefaultTTL is the TTL of every lease the scheduler takes.
	DefaultTTL = 15 * time.Second
	// DefaultExtraRenewals is the default of [Config].ExtraRenewals.
	DefaultExtraRenewals = 4
)

// Handler works on one target while the scheduler holds its lease. token is
// the lease's fencing token: send it with every write to the resource the
// target stands for. ctx is cancelled when the lease is lost (the cause
// matches [protocol.ErrLeaseLost]), handed over to another worker
// ([ErrHandedOver]), given up because the target left the set
// ([ErrRemoved]) or at shutdown ([ErrStopped]); context.Cause tells which.
//
// The handler runs once per lease, in a goroutine of its own, and should
// return soon after ctx ends: the scheduler keeps renewing the lease until
// it returns, and releases it only then. The cause is the first reason
// only: a lease given up may still be revoked or run out before the
// handler returns (the Snapshot then shows it lost), and another worker
// may take the target meanwhile, so a handler finishing its work keeps
// sending its token. A handler that returns while its
// lease is still held leaves the target owned (idle) until it is handed
// over or the scheduler stops; it is not called again for that lease.
type Handler func(ctx context.Context, target string, token int64)

// Targets returns the current set of targets, as lease names. It is called
// once per round (and per look between rounds) with a context bounded by
// [Config].OpTimeout, which ends when Run's does; duplicates are
// ignored, and names that are not valid lease names are left out and
// logged. When it returns an error, the scheduler keeps the previous set
// for that round; until it first answers, there is none, and the worker
// does not join (the other workers do not count it, and it claims
// nothing).
type Targets func(ctx context.Context) ([]string, error)

// Static returns [Targets] for a fixed list. The list is copied.
func Static(targets ...string) Targets {
	list := slices.Clone(targets)
	return func(context.Context) ([]string, error) { return list, nil }
}

// Causes of a handler's context ending other than a lost lease (which is
// [protocol.ErrLeaseLost], wrapped with the reason).
var (
	// ErrHandedOver: the worker holds more than its fair share and gives
	// the target up so that another worker can take it.
	ErrHandedOver = errors.New("scheduler: handed over to rebalance")
	// ErrRemoved: the target is no longer in the set [Targets] returned.
	ErrRemoved = errors.New("scheduler: target removed from the set")
	// ErrStopped: the scheduler is shutting down.
	ErrStopped = errors.New("scheduler: stopped")
)

// Config tunes a [Scheduler]. A nil *Config means all defaults. Every worker
// sharing a set of targets must use the same Namespace and WorkersNamespace.
type Config struct {
	// Namespace holds the targets' leases: target T is the lease
	// (Namespace, T). Default: [DefaultNamespace].
	Namespace string
	// WorkersNamespace holds one membership lease per live worker, named
	// after its identity. It must differ from Namespace.
	// Default: Namespace + [WorkersSuffix].
	WorkersNamespace string
	// TTL of every lease the scheduler takes. A dead worker's targets are
	// taken over about TTL after its last renewal: the other workers look
	// again when its leases run out (by their local clock), not at their
	// next round; a store whose clock is behind theirs delays that to the
	// next round, so within TTL + RenewEvery. Default: [DefaultTTL] (15s).
	TTL time.Duration
	// RenewEvery is the interval between rounds (renew everything, look at
	// the workers and targets, rebalance), with ±10% jitter. A renewal that
	// starts as late as the jitter allows and takes the whole OpTimeout
	// must still land before the lease runs out: RenewEvery × 1.1 +
	// OpTimeout must not exceed TTL (with the default OpTimeout,
	// RenewEvery at most TTL/1.6). Default: TTL/3, so two rounds may fail
	// in a row before a lease runs out.
	RenewEvery time.Duration
	// OpTimeout bounds each store operation (list, acquire, release). A
	// renewal gets OpTimeout too, or longer while its lease's local
	// deadline (TTL after the last successful renewal was sent) is further
	// away; after each OpTimeout without an answer another renewal is sent
	// beside it, within ExtraRenewals, so that one hung renewal does not
	// cost the lease. It must be shorter than TTL: a round waits for each
	// call.
	// Default: RenewEvery, or, when that would let a late renewal land
	// after the lease ran out, TTL − RenewEvery × 1.1 if that is at least
	// half of RenewEvery (TTL 30s, RenewEvery 15s: 13.5s).
	OpTimeout time.Duration
	// ExtraRenewals bounds the extra renewals in flight at once, over all
	// the worker's leases: those sent beside a renewal still without an
	// answer after OpTimeout (see OpTimeout; at most three beside each,
	// one per OpTimeout). They are a safety net for a hung renewal, not a
	// multiplier: on a store that answers every renewal a little later
	// than OpTimeout, the worker sends one renewal per lease and at most
	// ExtraRenewals more, not several per lease. A renewal due an extra
	// while the budget is spent sends it as soon as one of those in
	// flight answers. A negative value sends none: a hung renewal then
	// costs its lease (lost when it would run out by the local clock) and
	// holds the round until then. Default: [DefaultExtraRenewals] (4).
	ExtraRenewals int
	// MaxBackoff caps the wait before a target that another worker took
	// first (a conflict) is tried again: the wait is random, between half
	// and one and a half times RenewEvery, doubling with each conflict in
	// a row, and always under MaxBackoff. A target kept by
	// the lock-delay of an ended lease is tried again when the delay ends.
	// Default: TTL.
	MaxBackoff time.Duration
	// LockDelay is the lock-delay of every target lease (see
	// protocol.AcquireRequest.LockDelay): after a worker's target lease is
	// revoked or runs out, no worker takes the target for this long, so a
	// handler that did not hear of the loss has time to stop. A handed-over
	// or released target is not kept: a worker below its fair share that
	// listens for its end (up to 8 busy targets each, through the store's
	// signal; none over a served store) takes it at once, else a worker
	// with room at its next round.
	// It is 0, or 1µs (protocol.MinLockDelay, the resolution it is kept
	// at) to 1h. Default: 0, none (or the store's namespace default).
	LockDelay time.Duration
	// Logger receives the scheduler's logs: acquired, handed over and
	// released at info, lost at warn, store trouble at warn, renewals at
	// debug. Default: slog.Default().
	Logger *slog.Logger
	// Observer receives an [Event] per acquire, busy target, loss, hand-over,
	// release and round. Default: none.
	Observer Observer
}

// settings is a validated Config with defaults applied.
type settings struct {
	ns, workersNS string
	ttl, every    time.Duration
	lockDelay     time.Duration
	opTimeout     time.Duration
	maxBackoff    time.Duration
	extraRenewals int // 0: none
	log           *slog.Logger
	observer      Observer
}

// lateRenewalEnd is how long after the last renewal was sent the next one
// may end: sent as late as the jitter allows, answered as late as
// opTimeout allows.
func lateRenewalEnd(every, opTimeout time.Duration) time.Duration {
	return time.Duration(float64(every)*(1+maxJitter)) + opTimeout
}

// minDefaultOpShare is the shortest default OpTimeout, as a share of
// RenewEvery: a shorter one would time out calls a store answers in
// ordinary time.
const minDefaultOpShare = 0.5

// defaultOpTimeout is OpTimeout's default: every, or shorter, down to
// every × minDefaultOpShare, so that a renewal sent as late as the jitter
// allows still lands within ttl (lateRenewalEnd). Below that it stays
// every, and New refuses the RenewEvery (renewTooLate).
func defaultOpTimeout(ttl, every time.Duration) time.Duration {
	room := ttl - time.Duration(float64(every)*(1+maxJitter))
	if room < every && room >= time.Duration(float64(every)*minDefaultOpShare) {
		return room
	}
	return every
}

// renewTooLate explains why s's RenewEvery is refused and names the
// largest one allowed. opDefault says that OpTimeout is the default
// (defaultOpTimeout).
func renewTooLate(s settings, opDefault bool) error {
	most := time.Duration(float64(s.ttl-s.opTimeout) / (1 + maxJitter))
	if opDefault {
		most = time.Duration(float64(s.ttl) / (1 + maxJitter + minDefaultOpShare))
	}
	most = most.Truncate(time.Millisecond)
	fix := fmt.Sprintf("set it to at most %s", durations.Format(most))
	if opDefault {
		fix += " (with the default OpTimeout)"
	}
	if op := s.ttl - time.Duration(float64(s.every)*(1+maxJitter)); op > 0 {
		fix += fmt.Sprintf(", or OpTimeout to at most %s", durations.Format(op.Truncate(time.Millisecond)))
	}
	return fmt.Errorf("renew every: %s with op timeout %s: a renewal sent %.0f%% late (jitter) that takes the whole op timeout "+
		"ends %s after the last one was sent, after the ttl %s, so the lease would run out; %s (default: a third of the ttl)",
		durations.Format(s.every), durations.Format(s.opTimeout), maxJitter*100,
		durations.Format(lateRenewalEnd(s.every, s.opTimeout)), durations.Format(s.ttl), fix)
}

func (c *Config) resolve() (settings, error) {
	if c == nil {
		c = &Config{}
	}
	s := settings{ns: c.Namespace, workersNS: c.WorkersNamespace, ttl: c.TTL, every: c.RenewEvery,
		opTimeout: c.OpTimeout, maxBackoff: c.MaxBackoff, log: c.Logger, observer: c.Observer, lockDelay: c.LockDelay,
		extraRenewals: c.ExtraRenewals}
	if s.ns == "" {
		s.ns = DefaultNamespace
	}
	if s.workersNS == "" {
		s.workersNS = s.ns + WorkersSuffix
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	if s.every == 0 {
		s.every = s.ttl / 3
	}
	if s.opTimeout == 0 {
		s.opTimeout = defaultOpTimeout(s.ttl, s.every)
	}
	if s.maxBackoff == 0 {
		s.maxBackoff = s.ttl
	}
	switch {
	case s.extraRenewals == 0:
		s.extraRenewals = DefaultExtraRenewals
	case s.extraRenewals < 0:
		s.extraRenewals = 0
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	var errs []error
	if err := textfield.Validate("namespace", s.ns, protocol.MaxNamespaceLen); err != nil {
		errs = append(errs, err)
	}
	if c.WorkersNamespace == "" && len(s.workersNS) > protocol.MaxNamespaceLen {
		errs = append(errs, fmt.Errorf("workers namespace: Namespace + %q is %d bytes, longer than the limit of %d: set WorkersNamespace or a shorter Namespace",
			WorkersSuffix, len(s.workersNS), protocol.MaxNamespaceLen))
	} else if err := textfield.Validate("workers namespace", s.workersNS, protocol.MaxNamespaceLen); err != nil {
		errs = append(errs, err)
	}
	if s.ns == s.workersNS {
		errs = append(errs, fmt.Errorf("workers namespace: must differ from the targets' namespace %q", s.ns))
	}
	// A setting that defaults from one already refused is not refused
	// again for the value it took from it: one bad duration, one error.
	badTTL := s.ttl < protocol.MinTTL || s.ttl > protocol.MaxTTL
	if badTTL {
		errs = append(errs, fmt.Errorf("ttl: %s is outside [%s, %s]", durations.Format(s.ttl), durations.Format(protocol.MinTTL), durations.Format(protocol.MaxTTL)))
	}
	badEvery := s.every <= 0
	lateEvery := false // refused: a late renewal would land after the TTL
	switch {
	case c.RenewEvery == 0 && badTTL:
	case badEvery:
		errs = append(errs, fmt.Errorf("renew every: %s must be positive", durations.Format(s.every)))
	case (c.OpTimeout == 0 || s.opTimeout < s.ttl) && lateRenewalEnd(s.every, s.opTimeout) > s.ttl:
		// (An OpTimeout set not shorter than the TTL has its own error.)
		errs = append(errs, renewTooLate(s, c.OpTimeout == 0))
		lateEvery = true
	}
	if s.lockDelay < 0 || s.lockDelay > protocol.MaxLockDelay {
		errs = append(errs, fmt.Errorf("lock delay: %s is outside [0, %s]", durations.Format(s.lockDelay), durations.Format(protocol.MaxLockDelay)))
	} else if s.lockDelay > 0 && s.lockDelay < protocol.MinLockDelay {
		errs = append(errs, fmt.Errorf("lock delay: %s is under %s, the resolution lock-delays are kept at (it would be kept as none): "+
			"write 0s for none, or at least %s", durations.Format(s.lockDelay), durations.Format(protocol.MinLockDelay),
			durations.Format(protocol.MinLockDelay)))
	}
	switch {
	case c.OpTimeout == 0 && (badTTL || badEvery || lateEvery):
		// The default follows RenewEvery (and the TTL): refused with it.
	case s.opTimeout <= 0:
		errs = append(errs, fmt.Errorf("op timeout: %s must be positive", durations.Format(s.opTimeout)))
	case s.opTimeout >= s.ttl:
		errs = append(errs, fmt.Errorf("op timeout: %s is not shorter than the ttl %s: one store call waiting that long holds "+
			"a round, and the next round's renewals, past the leases' expiry; set it shorter (default: RenewEvery)",
			durations.Format(s.opTimeout), durations.Format(s.ttl)))
	}
	if s.maxBackoff <= 0 && (c.MaxBackoff != 0 || !badTTL) {
		errs = append(errs, fmt.Errorf("max backoff: %s must be positive", durations.Format(s.maxBackoff)))
	}
	if len(errs) > 0 {
		return settings{}, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return s, nil
}
