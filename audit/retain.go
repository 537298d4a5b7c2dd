package audit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// RetainConfig tunes [Retain].
type RetainConfig struct {
	// Keep is how long records stay in the trail: each prune removes the
	// records older than now minus Keep. Required, positive.
	Keep time.Duration
	// Every is the time between prunes. Default: Keep/10, at least a second
	// and at most an hour.
	Every time.Duration
	// Actor is who prunes, kept in each prune's record. Default
	// "leasestore-retention".
	Actor string
	// Logger receives a line per prune that removed records (info) or
	// failed (warn). Default: slog.Default().
	Logger *slog.Logger
}

// DefaultRetainActor is the actor of a prune made by [Retain].
const DefaultRetainActor = "leasestore-retention"

// Retain keeps the trail within cfg.Keep without an operator: it prunes
// the records older than Keep through p at once and then every cfg.Every,
// until ctx ends (then it returns nil). Each prune is an ordinary
// [Pruner.PruneAudit]: the backend removes records oldest first in bounded
// batches, each its own transaction, and leaves a prune record. A failed
// prune is logged and tried again at the next tick. Run it in a goroutine
// of its own, one per store (more are safe, and only prune more often).
func Retain(ctx context.Context, p Pruner, cfg RetainConfig) error {
	if p == nil {
		return errors.New("audit: retain: no pruner")
	}
	if cfg.Keep <= 0 {
		return errors.New("audit: retain: Keep must be positive")
	}
	every := cfg.Every
	if every <= 0 {
		every = min(max(cfg.Keep/10, time.Second), time.Hour)
	}
	actor := cfg.Actor
	if actor == "" {
		actor = DefaultRetainActor
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		req := PruneRequest{Before: time.Now().Add(-cfg.Keep), Actor: actor, RequestID: protocol.RandomRequestID()}
		res, err := p.PruneAudit(ctx, req)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("audit retention: prune failed; trying again at the next tick", "before", req.Before, "removed", res.Removed, "err", err)
		case res.Removed > 0:
			log.Info("audit retention: pruned", "removed", res.Removed, "before", req.Before)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
