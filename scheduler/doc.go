// Package scheduler shares a set of targets (scan targets, shards, queues)
// among a fleet of workers through leases, so that each target is worked
// on by one worker at a time and every worker gets a fair share.
//
// Each worker process runs a [Scheduler] with its identity, a
// [protocol.Store], the targets (a static list, [Static], or a function
// returning the current set) and a [Handler]. The scheduler then, in rounds
// every [Config].RenewEvery:
//
//   - holds a membership lease named after its identity in a namespace of
//     its own ([Config].WorkersNamespace); the live membership leases are the
//     live workers (a worker joins once its [Targets] first answered);
//   - claims a fair share of the targets, ceil(targets / live workers), by
//     acquiring the lease of each target (in [Config].Namespace) that no live
//     lease holds, in a random order, and runs the handler once per lease,
//     with the lease's fencing token and a context cancelled when the lease
//     is lost or given up;
//   - hears at once, through the store's signal ([protocol.WatchLease]), that
//     a target lease was revoked or released elsewhere, and cancels its
//     handler (a lease it is giving up stays watched until its handler
//     returned, and is then shown lost); so of its membership lease: the
//     worker then no longer counts itself a member and joins again at
//     once;
//   - renews every lease it holds (membership included), sending another
//     renewal beside one without an answer after [Config].OpTimeout (at
//     most [Config].ExtraRenewals such extra renewals in flight over all
//     its leases, so that a slow store's load is not multiplied); a
//     renewal the store refuses (its credentials' refusal too) loses that
//     lease at once, one it answers renewed keeps it (also without a copy
//     of the lease in the answer), and a lease that
//     was not renewed before it would run out by the local clock is lost
//     then, even while the store does not answer (a membership lease too:
//     the worker then no longer counts itself a member, claims nothing,
//     and tries at once to join again, renewing that lease first, whose
//     answers alone may have been lost);
//   - hands over targets beyond its share when workers join (cancels their
//     handlers and releases each lease once its handler returned), gives up
//     targets that left the set, and releases everything on shutdown;
//   - takes over a dead worker's targets as their leases expire: between
//     rounds it looks again at the expiry of the other workers' leases it
//     saw (membership, targets, conflicts), so a takeover does not wait
//     for the next round; and it backs off, with jitter, from a target that
//     another worker took first (at most until that lease's expiry), and
//     waits for the end of a lock-delay that keeps a target;
//   - below its share, listens through the store's signal for the end of a
//     few busy targets (up to 8), and takes one released or handed over at
//     once, not at the next round; not over a store whose subscriptions are
//     capped (protocol.CappedNotifier: a served store's streams), which it
//     leaves to the watches of leases.
//
// A store closed under a running worker never answers again: at its first
// closed answer the worker loses every lease and its membership, releases
// nothing, and [Scheduler.Run] returns, once the handlers returned, an
// error matching protocol.ErrClosed. Close the store after Run returned.
//
// Fencing: a lease lost by one worker may be taken by another while the
// first one's handler is still finishing, so two handlers of one target may
// briefly overlap; their tokens differ, and a resource that refuses writes
// whose token is lower than the last one it accepted for that target never
// accepts the older handler's writes after the newer one's. Handlers must
// send their token with every write, and should stop when their context
// ends.
//
// What a scheduler owns and why is visible through [Scheduler.Snapshot],
// an [Observer] (promobserver exports it to Prometheus) and slog logs.
//
// This package depends on protocol only: it must not import any database
// driver or any package under sqlstore/ (a test in the module enforces it).
package scheduler
