package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// waitFlags are --wait and --wait-timeout of acquire and run.
type waitFlags struct {
	wait    bool
	timeout time.Duration // 0: no limit
}

func (w *waitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&w.wait, "wait", false, "wait while the key is held, until it is released, revoked or expires")
	f.Var(newZeroDurationFlag(&w.timeout, 0, 0), "wait-timeout", "with --wait: give up after this long (exit 3, conflict); 0 waits until interrupted")
}

// check refuses --wait-timeout without --wait (the flag refuses a
// negative one).
func (w *waitFlags) check(cmd *cobra.Command) error {
	if cmd.Flags().Changed("wait-timeout") && !w.wait {
		return usageError("--wait-timeout: only with --wait")
	}
	return nil
}

// context returns ctx bounded by --wait-timeout, when one is set.
func (w *waitFlags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.timeout > 0 {
		return context.WithTimeout(ctx, w.timeout)
	}
	return context.WithCancel(ctx)
}

// waitConfig logs each holder the wait sleeps on, once per lease: a live
// one until its expiry, or an ended one whose lock-delay keeps the key
// until its FreeAt. Waiting is given the lease, not the store's verdict,
// so this clock judges which ([protocol.Lease.DelayedAt]).
func (a *app) waitConfig(key protocol.Key) *protocol.WaitConfig {
	var last int64
	return &protocol.WaitConfig{Waiting: func(l protocol.Lease) {
		if l.Token == last {
			return
		}
		last = l.Token
		if l.DelayedAt(time.Now()) {
			a.log.Info("waiting: the key is kept by the lock-delay of an ended lease", "key", key.String(), "holder", l.Owner,
				"token", l.Token, "ended", l.ExpiresAt.UTC().Format(time.RFC3339), "free_at", l.FreeAt().UTC().Format(time.RFC3339))
			return
		}
		a.log.Info("waiting: the key is held", "key", key.String(), "holder", l.Owner, "token", l.Token,
			"until", l.ExpiresAt.UTC().Format(time.RFC3339))
	}}
}

// acquireWaiting is acquire --wait: it waits for the key with
// protocol.AcquireWait, each attempt bounded by --timeout, the whole wait
// by --wait-timeout (conflict when it passes) and interruption.
func (a *app) acquireWaiting(cmd *cobra.Command, req protocol.AcquireRequest, check func() error, w waitFlags) error {
	if err := check(); err != nil {
		return &failure{status: string(protocol.StatusInvalid), err: err}
	}
	s, err := a.openStoreFor(cmd.Context(), writeAccess)
	if err != nil {
		return err
	}
	defer s.close(a)
	ctx, cancel := w.context(cmd.Context())
	defer cancel()
	res, err := s.rt.AcquireWait(ctx, req, a.waitConfig(req.Key))
	return a.printOutcome(interruptedWait(cmd.Context(), res), err)
}

// interruptedWait is the result of a wait that ended in conflict: when
// ctx (the command's context, which main cancels on SIGINT and SIGTERM;
// not --wait-timeout's) ended, the wait was interrupted, and the command
// exits 130: its status says so too, interrupted, keeping the holder it
// waited for in the lease. A conflict the store said a lock-delay caused
// keeps [protocol.LockDelayPrefix] and says when the key is free (or,
// past that, that the store has not yet freed it), as the wait's own
// message does ([keptByLockDelay]). Any other result is res.
func interruptedWait(ctx context.Context, res protocol.Result) protocol.Result {
	l := res.Lease
	if ctx.Err() == nil || res.Status != protocol.StatusConflict || l == nil {
		return res
	}
	const stopped = "stopped waiting (Ctrl-C or SIGTERM)"
	// Judged now: past the end of the lock-delay or the expiry (a store
	// that sees them late, never early), it says the store has not yet
	// freed the key rather than a time already past.
	switch now := time.Now(); {
	case res.KeptByLockDelay():
		res.Message = protocol.LockDelayPrefix + stopped + ": " + l.LockDelayText(now)
	case l.LiveAt(now):
		res.Message = fmt.Sprintf("%s: the key is held by %s with token %d until %s", stopped, lineValue(l.Owner), l.Token,
			l.ExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		res.Message = stopped + ": " + l.ExpiredText()
	}
	res.Status = protocol.Status(StatusInterrupted)
	return res
}

// keptByLockDelay reports whether res carries an ended lease whose
// lock-delay keeps the key, by the store's verdict: an acquire's conflict
// the store said a lock-delay caused ([protocol.Result.KeptByLockDelay]),
// or such a conflict that interruptedWait turned into interrupted, which
// keeps its message's [protocol.LockDelayPrefix].
func keptByLockDelay(res protocol.Result) bool {
	if res.Status == protocol.Status(StatusInterrupted) && res.Lease != nil {
		res.Status = protocol.StatusConflict
	}
	return res.KeptByLockDelay()
}
