// Package lincheck checks that concurrent histories of a lease store are
// linearizable, with github.com/anishathalye/porcupine: a [Workload] drives
// a [protocol.Store] with random acquire, renew, release, get and revoke on
// a few keys from concurrent clients, a [Recorder] writes each logical
// operation down (optionally as JSON lines, so that several OS processes
// can contribute to one [History]), and [Check] searches for a sequential
// order of the operations that a single fenced lease per key could have
// produced. Backends' tests call it under faults (killed processes,
// terminated connections, server restarts).
//
// # The model
//
// Each key is checked on its own (porcupine partitions by key). Its state is
// the row: free, or held by an owner with a token and an expiry; and a
// bound below which no later token may fall. The model follows DESIGN.md:
//
//   - Fencing: a successful acquire's token must be strictly greater than
//     every token issued for the key before it. Tokens are not expected to be
//     consecutive (sequences leave gaps). Renew keeps the token.
//   - Precedence: renew, release and revoke must answer the status that
//     DESIGN.md's table gives for the row at the moment the operation took
//     effect; conflict, found, stale_token, not_owner and expired must carry
//     that row's owner and token when they carry a lease.
//   - Retries: a [Workload] operation is a retry chain, every attempt with the
//     same request id. It is one logical operation from the first call to the
//     last return, and its outcome is the last attempt's, replayed or not. A
//     replayed acquire is only history: the model places its effect somewhere
//     in the chain, not at its end.
//   - Unknown outcomes: an operation whose chain ended with timeout,
//     unavailable or closed, or that never returned (its process was killed),
//     may or may not have taken effect. The model is nondeterministic there
//     (porcupine's NondeterministicModel): both states follow. Such an
//     operation stays open until the end of the history, because a server
//     may still run a statement whose client gave up; only [History.Lost]
//     closes the operations of a process earlier, at the time the process
//     and everything it sent were gone (a killed process on an embedded
//     store). An acquire of unknown outcome issues a token the model does
//     not know; the next result that shows the row reveals it.
//   - Expiry is judged by the backend's clock, which on one machine is the
//     wall clock the recorder reads. The model does not know when, within an
//     operation's interval, the backend read its clock: a lease with
//     expires_at e may be judged live by an operation that was called before
//     e, and expired by one that returned after e (with [ClockSlack] either
//     side). So workloads may use short TTLs, leases really expire during the
//     run, and expired, conflict over an expired row and acquire over it are
//     all checked; what the model cannot catch is a backend that judges
//     expiry a little off inside an operation's own interval. The
//     expires_at that acquire and renew return must lie TTL after some
//     instant of the operation's interval.
//
// # Times
//
// Histories carry wall-clock Unix nanoseconds, so the processes that
// contribute to one history must run on one machine (one clock).
//
// lincheck is an ordinary package, like contract, so that backends in other
// modules can use it. It must not import any database driver or any package
// under sqlstore/.
package lincheck
