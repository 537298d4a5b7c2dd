package protocol

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Sweeper is implemented by backends that keep the entries of expired
// leases until they are removed (every shipped backend: SQLite, PostgreSQL,
// etcd and memstore; PostgreSQL also keeps the rows of released and
// revoked leases, as tombstones, which the others delete as the lease
// ends). [Runtime] sweeps such a backend in the background (see
// [Config].Sweep, [SweepConfig].Every); `leasectl gc` sweeps on demand.
//
// Sweeping never weakens fencing: a backend removes a row only when an
// acquire of its key after the removal is sure to get a greater token.
// Nor does it touch the audit trail: the lease had already ended. What it
// changes is the answer to the former holder: a renew or release after
// the row is gone answers not_found instead of expired, which is why only
// rows that ended more than a grace period ago go.
type Sweeper interface {
	// Sweep removes up to max rows of leases that expired or ended more
	// than grace ago (by the backend's clock), and may set aside up to max
	// rows of other ended leases, and says how many of each. A max of 0
	// or less sweeps nothing, and a negative grace counts as 0: a lease
	// that has not ended (nor its lock-delay) is never removed. Many
	// processes may sweep one store at once.
	Sweep(ctx context.Context, max int, grace time.Duration) (SweepResult, error)
}

// SweepResult is what one [Sweeper.Sweep] call did.
type SweepResult struct {
	// Removed counts the rows removed.
	Removed int
	// SetAside counts the rows of ended leases taken out of the indexes
	// that lists of live leases read (the SQL backends), so that those
	// lists cost nothing for them; their leases answer as before.
	SetAside int
}

// OpSweep names a sweep in an [OperationEvent].
const OpSweep Op = "sweep"

// SweepConfig tunes the background sweep of a [Runtime] over a backend that
// implements [Sweeper]: at most once per Every, after one of the runtime's
// operations, a sweep runs in a goroutine of its own (Close waits for it).
// A nil *SweepConfig means all defaults.
type SweepConfig struct {
	// Every is the pause between sweeps, with up to a fifth of it added or
	// taken at random so that processes spread out (any positive value is
	// taken: a pause past the largest Duration is the largest, so a huge
	// Every means no background sweep). A negative value turns the
	// background sweep off. Default: [DefaultSweepEvery].
	Every time.Duration
	// Batch bounds the rows one Sweep call removes (and sets aside); a
	// sweep calls again while batches come back full, for at most a
	// twentieth of Every (at least one call), so that a mass expiry is
	// worked off in minutes while sweeping stays a small part of the
	// store's work. Default: 1000.
	Batch int
	// Grace is how long after a lease ended its row stays, so that its
	// holder still hears expired rather than not_found. Default:
	// [DefaultSweepGrace].
	Grace time.Duration
	// Logger gets a debug line per batch that removed rows, and failures.
	// Default: [slog.Default].
	Logger *slog.Logger
}

// Defaults of [SweepConfig].
const (
	DefaultSweepEvery = time.Minute
	DefaultSweepGrace = time.Hour
	defaultSweepBatch = 1000
	sweepDutyCycle    = 20 // a sweep works for at most Every/sweepDutyCycle
)

// sweepLoop runs a Runtime's sweeps. They ride on the runtime's own
// operations: after an operation, when Every passed since the last sweep
// began (or since the runtime was made), one sweep runs in a goroutine of
// its own. So there is no goroutine while nothing sweeps, a runtime that
// serves no operations does not sweep (the processes that do, do), and
// Close waits only for a sweep in flight.
type sweepLoop struct {
	s        Sweeper
	backend  string
	cfg      SweepConfig
	timeout  time.Duration
	observer Observer
	ctx      context.Context
	cancel   context.CancelFunc

	mu      sync.Mutex
	next    time.Time // when the next sweep may begin
	running bool
	wg      sync.WaitGroup
}

// startSweep returns the sweep of b, or nil when b does not sweep or cfg
// turns it off.
func startSweep(b Backend, cfg *SweepConfig, timeout time.Duration, observer Observer) *sweepLoop {
	s, ok := b.(Sweeper)
	if !ok {
		return nil
	}
	c := SweepConfig{Every: DefaultSweepEvery, Batch: defaultSweepBatch, Grace: DefaultSweepGrace}
	if cfg != nil {
		if cfg.Every != 0 {
			c.Every = cfg.Every
		}
		if cfg.Batch > 0 {
			c.Batch = cfg.Batch
		}
		if cfg.Grace > 0 {
			c.Grace = cfg.Grace
		}
		c.Logger = cfg.Logger
	}
	if c.Every < 0 {
		return nil
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &sweepLoop{s: s, backend: b.Name(), cfg: c, timeout: timeout, observer: observer, ctx: ctx, cancel: cancel}
	l.next = time.Now().Add(l.pause())
	return l
}

// pause is Every with up to a fifth of it added or taken at random, so
// that processes spread their sweeps out. It never overflows: a pause past
// the largest Duration is the largest Duration (a huge Every means no
// sweep for as long, never a panic or a sweep at once).
func (l *sweepLoop) pause() time.Duration {
	e := l.cfg.Every
	spread := e / 5 // 2*spread+1 cannot overflow, as 2*e/5 would for e above MaxInt64/2
	p := e - spread + rand.N(2*spread+1)
	if p < e-spread { // wrapped past math.MaxInt64
		return math.MaxInt64
	}
	return p
}

// poke starts a sweep when one is due and none runs; nil-safe.
func (l *sweepLoop) poke() {
	if l == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if l.running || now.Before(l.next) || l.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.running, l.next = true, now.Add(l.pause())
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		sweepOnce(l.ctx, l.s, l.backend, l.cfg, l.timeout, l.observer)
		l.mu.Lock()
		l.running = false
		l.mu.Unlock()
	}()
}

// sweepOnce runs batches until one comes back short, fails, or
// Every/sweepDutyCycle passed (it runs one batch at least).
func sweepOnce(ctx context.Context, s Sweeper, backend string, c SweepConfig, timeout time.Duration, observer Observer) {
	deadline := time.Now().Add(c.Every / sweepDutyCycle)
	for first := true; first || time.Now().Before(deadline); first = false {
		start := time.Now()
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		n, err := s.Sweep(opCtx, c.Batch, c.Grace)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ev := OperationEvent{Op: OpSweep, Duration: time.Since(start), Backend: backend, Items: n.Removed}
		if err != nil {
			ev.Status = StatusOf(err)
			if ev.Status.Success() || !ev.Status.Known() {
				ev.Status = StatusUnavailable
			}
		}
		if observer != nil {
			observer.ObserveOperation(ctx, ev)
		}
		if err != nil {
			c.Logger.Warn("lease: sweeping ended leases failed; trying again later", "backend", backend, "err", err)
			return
		}
		if n.Removed > 0 || n.SetAside > 0 {
			c.Logger.Debug("lease: swept the rows of ended leases", "backend", backend, "removed", n.Removed, "set_aside", n.SetAside)
		}
		if n.Removed < c.Batch && n.SetAside < c.Batch {
			return
		}
	}
}

// stop ends a sweep in flight and waits for it; no sweep starts
// afterwards. nil-safe.
func (l *sweepLoop) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.cancel()
	l.mu.Unlock()
	l.wg.Wait()
}
