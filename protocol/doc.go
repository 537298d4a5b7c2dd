// Package protocol defines leasestore's backend-neutral lease protocol: keys,
// leases, the status vocabulary, request and result types, the [Backend]
// interface that storage engines implement, the [Runtime] that callers use,
// and the observer and audit hooks.
//
// A worker takes a lease on a [Key] for a TTL with [Runtime.Acquire], renews
// it with [Runtime.Renew] while it works and gives it up with
// [Runtime.Release]. Every successful acquire issues a fencing token that is
// strictly greater than every token ever issued for that key, so a resource
// can refuse a writer that paused past its lease.
//
// [AcquireWait] (and [HoldConfig].Wait) blocks until the key can be taken:
// it sleeps until the holder's expiry, and a backend that implements the
// optional [Notifier] (every shipped one does) wakes it as soon as the
// holder releases or is revoked, in any process sharing the store.
//
// Services and HTTP handlers should depend on the [Store] interface, which
// [*Runtime] satisfies, rather than on any backend.
//
// This package must not import any database driver or any package under
// sqlstore/; a test in the module enforces that boundary.
package protocol
