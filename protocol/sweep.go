package protocol

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Sweeper is implemented by backends that keep the rows of expired,
// released and revoked leases until they are removed (both SQL backends and
// memstore). [Runtime] sweeps such a backend in the background (see
// [Config].SweepEvery); `leasectl gc` sweeps on demand.
//
// Sweeping never weakens fencing: a backend removes a row only when an
// acquire of its key after the removal is sure to get a greater token.
// Nor does it touch the audit trail: the lease had already ended. What it
// changes is the answer to the former holder: a renew or release after
// the row is gone answers not_found instead of expired, which is why only
// rows that ended more than a grace period ago go.
type Sweeper interface {
	// Sweep removes up to max rows of leases that expired or ended more
	// than grace ago (by the backend's clock) and returns how many it
	// removed. Many processes may sweep one store at once.
	Sweep(ctx context.Context, max int, grace time.Duration) (int, error)
}

// OpSweep names a sweep in an [OperationEvent].
const OpSweep Op = "sweep"

// SweepConfig tunes the background sweep of a [Runtime] over a backend that
// implements [Sweeper]. A nil *SweepConfig means all defaults.
type SweepConfig struct {
	// Every is the pause between sweeps, with up to a fifth of it added or
	// taken at random so that processes spread out. A negative value turns
	// the background sweep off. Default: [DefaultSweepEvery].
	Every time.Duration
	// Batch bounds the rows one Sweep call removes; a sweep calls again
	// while batches come back full, up to 10 times. Default: 1000.
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
	maxSweepBatches   = 10
)

// sweepLoop is a Runtime's background sweep: one goroutine, stopped by
// stop, which waits for it.
type sweepLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startSweep starts the background sweep of b, or returns nil when b does
// not sweep or cfg turns it off.
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
	l := &sweepLoop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			pause := c.Every - c.Every/5 + rand.N(2*c.Every/5+1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			sweepOnce(ctx, s, b.Name(), c, timeout, observer)
		}
	}()
	return l
}

// sweepOnce runs batches until one comes back short, fails, or
// maxSweepBatches ran.
func sweepOnce(ctx context.Context, s Sweeper, backend string, c SweepConfig, timeout time.Duration, observer Observer) {
	for range maxSweepBatches {
		start := time.Now()
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		n, err := s.Sweep(opCtx, c.Batch, c.Grace)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ev := OperationEvent{Op: OpSweep, Duration: time.Since(start), Backend: backend, Items: n}
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
		if n > 0 {
			c.Logger.Debug("lease: swept the rows of ended leases", "backend", backend, "removed", n)
		}
		if n < c.Batch {
			return
		}
	}
}

// stop ends the sweep and waits for it; nil-safe.
func (l *sweepLoop) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}
