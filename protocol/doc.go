// Package protocol is leasestore's lease API: the [Runtime] callers use and
// the [Store] interface it implements, [Key], [Lease], [Result], the
// [Status] vocabulary and its errors ([Error], [ErrConflict] and the other
// sentinels), [Hold] for a lease renewed in the background, [AcquireWait],
// and [Config] with its observer and audit hooks.
//
// A worker takes a lease on a [Key] for a TTL with [Runtime.Acquire], renews
// it with [Runtime.Renew] while it works and gives it up with
// [Runtime.Release]. Every successful acquire issues a fencing token that is
// strictly greater than every token ever issued for that key, so a resource
// can refuse a writer that paused past its lease. [Hold] does the renewing
// and tells, through [Held.Context], when the lease is lost.
//
// [AcquireWait] (and [HoldConfig].Wait) blocks until the key can be taken:
// it sleeps until the holder's expiry, and a backend that implements the
// optional [Notifier] (every shipped one does) wakes it as soon as the
// holder releases or is revoked, in any process sharing the store.
//
// Services and HTTP handlers should depend on the [Store] interface, which
// [*Runtime] satisfies, rather than on any backend.
//
// A runtime wraps a [Backend] (sqlstore/postgres, sqlstore/sqlite,
// memstore, an httpapi client); [Sweeper], [BulkRenewer], [Notifier] (and
// [CappedNotifier]) and [NamespaceLister] are what a backend may offer
// beside it. Writing a backend takes package backendkit too, which holds
// what only backend authors need: the precedence table, request
// fingerprints, list cursors.
//
// This package must not import any database driver or any package under
// sqlstore/; a test in the module enforces that boundary.
package protocol
