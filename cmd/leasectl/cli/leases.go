package cli

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// DefaultTTL is the lease duration of acquire without --ttl (renew without
// --ttl keeps the lease's own).
const DefaultTTL = 30 * time.Second

// orProbe returns id, or a stand-in when it is empty, so that a request can
// be validated before the runtime generates its id.
func orProbe(id string) string {
	if id == "" {
		return "probe"
	}
	return id
}

// withStore checks the request with check before anything is opened (bad
// input never creates or touches a store), then opens the store for access,
// runs fn with a context bounded by --timeout, and closes the store. fn
// runs through readOnce: what it printed from a SQLite file read without
// locks is shown only if the file did not change meanwhile.
func (a *app) withStore(cmd *cobra.Command, access access, check func() error,
	fn func(ctx context.Context, s *store) error) error {
	if err := check(); err != nil {
		return &failure{status: string(protocol.StatusInvalid), err: err}
	}
	s, err := a.openStoreFor(cmd.Context(), access)
	if err != nil {
		return err
	}
	defer s.close(a)
	ctx, cancel := a.opContext(cmd.Context())
	defer cancel()
	return a.readOnce(s, func() error { return fn(ctx, s) })
}

func (a *app) acquireCommand() *cobra.Command {
	var (
		ns, owner, reqID string
		ttl, lockDelay   time.Duration
		w                waitFlags
	)
	cmd := &cobra.Command{
		Use:   "acquire KEY",
		Short: "Take a lease on a key (exit 3 when someone holds it)",
		Long: `Take a lease on KEY for --ttl. On success the lease carries a fencing token
strictly greater than every token ever issued for the key: pass it to every
resource the holder writes to, and to renew and release.

If a live lease is held (by anyone, the same owner included) the answer is
conflict (exit 3) and the output shows the holder. With --wait, acquire
waits instead until the holder releases, is revoked or expires (woken by
the store, not by polling), up to --wait-timeout (then conflict, exit 3).
Ctrl-C or SIGTERM ends the wait with status interrupted (exit 130), the
holder in the output.

With --lock-delay D the lease carries a lock-delay: after it is revoked or
runs out un-renewed (not after its holder's release), acquires of the key
answer conflict (exit 3, the message says when the key is free) for D, so
that a holder that did not hear of its loss has time to stop.`,
		Example: `  leasectl acquire scan/10.0.0.0-24 --owner worker-1 --ttl 30s
  leasectl acquire shard-7 -n billing --owner "$(hostname)" -o json
  token=$(leasectl acquire nightly-report --ttl 10m -o token) || exit
  token=$(leasectl acquire nightly-report --ttl 10m --wait --wait-timeout 1h -o token) || exit`,
		Args: exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.AcquireRequest{Key: key, Owner: owner, TTL: ttl, RequestID: reqID,
				LockDelay: lockDelay}
			check := func() error {
				probe := req
				probe.RequestID = orProbe(reqID)
				return errors.Join(probe.Validate(), w.check(cmd))
			}
			if w.wait {
				return a.acquireWaiting(cmd, req, check, w)
			}
			return a.withStore(cmd, writeAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Acquire(ctx, req)
				return a.printOutcome(res, err)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	f.StringVar(&owner, "owner", a.defaultOwner, "owner of the lease")
	f.Var(newDurationFlag(&ttl, DefaultTTL, protocol.MinTTL, protocol.MaxTTL), "ttl", "lease duration (1ms to 7d; 90s, 15m, 2h, 1d)")
	f.Var(newLockDelayFlag(&lockDelay), "lock-delay", "after the lease is revoked or runs out, acquires of the key answer conflict for this long (0 to 1h; default: none, or the namespace default of a served store)")
	f.StringVar(&reqID, "request-id", "", "idempotency key: repeating it returns the first outcome (default: random)")
	w.register(cmd)
	return cmd
}

func (a *app) renewCommand() *cobra.Command {
	var (
		ns, owner, reqID string
		token            int64
		ttl              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "renew KEY",
		Short: "Extend a lease you hold (exit 4 when it is gone or newer)",
		Long: `Extend the lease (KEY, --owner, --token) to expire --ttl from the store's now;
without --ttl, its own TTL (the one it was acquired or last renewed with)
from now. The token does not change. A --ttl given outside 1ms to 7d (0s
too) is refused, exit 2, as acquire refuses it.

Refusals (exit 4): not_found (no lease), stale_token (a newer lease holds the
key: you were fenced off), not_owner (the token is someone else's or was never
issued), expired (your lease ran out; nobody took it yet: acquire again).`,
		Example: `  leasectl renew scan/10.0.0.0-24 --owner worker-1 --token 42 --ttl 30s`,
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.RenewRequest{Key: key, Owner: owner, Token: token, TTL: ttl,
				RequestID: reqID}
			check := func() error {
				// Only the absence of --ttl keeps the lease's TTL: an
				// explicit one is checked as acquire checks it, by the
				// flag.
				probe := req
				probe.RequestID = orProbe(reqID)
				return probe.Validate()
			}
			return a.withStore(cmd, writeAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Renew(ctx, req)
				return a.printOutcome(explainNotOwner(res, owner, token, time.Now()), err)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	f.StringVar(&owner, "owner", a.defaultOwner, "owner of the lease")
	intVar(f, &token, "token", 0, "fencing token of the lease (required)")
	f.Var(newDurationFlag(&ttl, 0, protocol.MinTTL, protocol.MaxTTL).withNote("leave --ttl out to keep the lease's own TTL"), "ttl", "new lease duration from now (1ms to 7d; 90s, 15m, 2h, 1d); default: the lease's own TTL")
	f.StringVar(&reqID, "request-id", "", "idempotency key (default: random)")
	_ = cmd.MarkFlagRequired("token")
	return cmd
}

func (a *app) releaseCommand() *cobra.Command {
	var (
		ns, owner, reqID string
		token            int64
	)
	cmd := &cobra.Command{
		Use:     "release KEY",
		Short:   "Give up a lease you hold",
		Long:    `Give up the lease (KEY, --owner, --token). Refusals exit 4, as for renew.`,
		Example: `  leasectl release scan/10.0.0.0-24 --owner worker-1 --token 42`,
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.ReleaseRequest{Key: key, Owner: owner, Token: token, RequestID: reqID}
			check := func() error { probe := req; probe.RequestID = orProbe(reqID); return probe.Validate() }
			return a.withStore(cmd, writeAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Release(ctx, req)
				return a.printOutcome(explainNotOwner(res, owner, token, time.Now()), err)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	f.StringVar(&owner, "owner", a.defaultOwner, "owner of the lease")
	intVar(f, &token, "token", 0, "fencing token of the lease (required)")
	f.StringVar(&reqID, "request-id", "", "idempotency key (default: random)")
	_ = cmd.MarkFlagRequired("token")
	return cmd
}

// revokeTime returns the time, by the store's clock, of the revoke whose
// result is res (a lease revoked, replayed or not): its audit record's,
// when the lease's lock-delay started. One newest-first read of the key's
// revokes; zero when that record is not the newest (pruned, or the key was
// revoked again since a replayed revoke) or the read fails.
func revokeTime(ctx context.Context, r audit.Reader, res protocol.Result) time.Time {
	l, k := res.Lease, res.Key
	if k == (protocol.Key{}) {
		k = l.Key
	}
	page, err := r.ReadAudit(ctx, audit.Query{Namespace: k.Namespace, Key: k.Name,
		Ops: []protocol.Op{protocol.OpRevoke}, Limit: 1, Newest: true})
	if err != nil || len(page.Records) != 1 {
		return time.Time{}
	}
	rec := page.Records[0]
	if rec.Token != l.Token || (res.RequestID != "" && rec.RequestID != res.RequestID) {
		return time.Time{}
	}
	return rec.At
}

func (a *app) getCommand() *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Show the live lease on a key (exit 4 when there is none)",
		Long: `Show the live lease on KEY. With none it answers not_found (exit 4); while
the lock-delay of the key's revoked or expired lease keeps it (acquires answer
conflict), not_found shows that ended lease and when the key is free.`,
		Example: `  leasectl get scan/10.0.0.0-24 -o json`,
		Args:    exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.GetRequest{Key: key}
			check := func() error { probe := req; probe.RequestID = orProbe(""); return probe.Validate() }
			return a.withStore(cmd, readAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Get(ctx, req)
				if cut := readCutOff(cmd.Context(), res.Status, err); cut != nil {
					return cut
				}
				return a.printOutcome(res, err)
			})
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var (
		req           protocol.ListRequest
		noHeaders     bool
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the leases of a namespace, by key name",
		Long: `List the live leases of a namespace ordered by key name, one page at a time.
When more leases exist, the output carries a cursor: pass it to --cursor for
the next page. Times left are computed with this machine's clock.
With -A (--all-namespaces) the pages run across every namespace that holds
a live lease, by namespace and then key.`,
		Example: `  leasectl list
  leasectl list -n billing --prefix shard- --owner worker-1
  leasectl list --limit 50 --cursor c1.c2hhcmQtNDk -o json
  leasectl list -A --owner worker-1`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if allNamespaces && cmd.Flags().Changed("namespace") {
				return usageError("list: -A lists every namespace; drop -n %s", req.Namespace)
			}
			check := func() error {
				probe := req
				probe.RequestID = orProbe("")
				if allNamespaces {
					probe.Cursor = ""
					if _, _, err := decodeAllCursor(req.Cursor); err != nil {
						return err
					}
				} else if strings.HasPrefix(req.Cursor, allCursorPrefix) {
					return usageError("--cursor: %q is a cursor of list -A: pass -A (--all-namespaces) with it, without -n", req.Cursor)
				}
				return probe.Validate()
			}
			return a.withStore(cmd, readAccess, check, func(ctx context.Context, s *store) error {
				var res protocol.ListResult
				if allNamespaces {
					var err error
					if res, err = listAllNamespaces(ctx, s, req); err != nil {
						return failWith(err)
					}
				} else {
					var err error
					if res, err = s.rt.List(ctx, req); authFailure(err) != nil {
						return authFailure(err)
					} else if cut := readCutOff(cmd.Context(), res.Status, err); cut != nil {
						return cut
					}
				}
				if res.Status != protocol.StatusFound {
					if a.output == "json" {
						a.printJSON(failureJSON("list", string(res.Status), a.red.redact(res.Message), ""))
						return reported{status: string(res.Status)}
					}
					return a.printResult(protocol.Result{
						Op: protocol.OpList, Status: res.Status, RequestID: res.RequestID, Message: res.Message,
					}, time.Time{})
				}
				if a.output == "json" {
					out := listJSON{Status: string(res.Status), Leases: []leaseJSON{}, NextCursor: res.NextCursor}
					for _, l := range res.Leases {
						out.Leases = append(out.Leases, toLeaseJSON(l))
					}
					a.printJSON(out)
					return nil
				}
				if len(res.Leases) == 0 {
					if allNamespaces {
						a.printEmpty("no leases\n", noHeaders)
					} else {
						a.printEmpty("no leases in namespace "+req.Namespace+"\n", noHeaders)
					}
					return nil
				}
				a.printText(formatLeases(res.Leases, time.Now(), noHeaders))
				a.morePages(cmd, res.NextCursor, noHeaders)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&req.Namespace, "namespace", "n", protocol.DefaultNamespace, "namespace to list")
	f.StringVar(&req.Prefix, "prefix", "", "only keys starting with this")
	f.StringVar(&req.Owner, "owner", "", "only leases held by this owner")
	f.BoolVar(&noHeaders, "no-headers", false, "table output: no header line (the next page's command goes to stderr)")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list every namespace that holds a live lease")
	f.BoolVar(&req.IncludeExpired, "include-expired", false, "also show expired leases not yet taken over")
	intVar(f, &req.Limit, "limit", protocol.DefaultListLimit, "page size, at most 1000 (0: the default, 100)")
	f.StringVar(&req.Cursor, "cursor", "", "next_cursor of the previous page")
	return cmd
}

func (a *app) revokeCommand() *cobra.Command {
	var (
		ns, actor, reason, reqID string
		token                    int64
	)
	cmd := &cobra.Command{
		Use:   "revoke KEY",
		Short: "Remove someone's lease, recording who and why",
		Long: `Remove the live lease on KEY whoever holds it. The audit trail records
--actor and --reason. With --token, only the lease with that token is revoked
(stale_token or not_owner otherwise), so an operator cannot revoke a newer
lease by mistake. A holder through 'leasectl run' (or protocol.Hold, the
scheduler) hears it at once; any other finds out at its next renew
(not_found). The next acquire issues a greater token, so the old holder is
fenced off.`,
		Example: `  leasectl revoke scan/10.0.0.0-24 --reason "worker-1 is stuck on a dead host"
  leasectl revoke shard-7 -n billing --token 42 --reason "INC-1234" --actor oncall@example.com`,
		Args: exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.RevokeRequest{Key: key, Actor: actor, Reason: reason, Token: token,
				RequestID: reqID}
			check := func() error { probe := req; probe.RequestID = orProbe(reqID); return probe.Validate() }
			return a.withStore(cmd, writeAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Revoke(ctx, req)
				var revokedAt time.Time
				if a.output == "table" && res.Status == protocol.StatusRevoked && res.Lease != nil && res.Lease.LockDelay > 0 {
					// The table says when the lock-delay ends: the result
					// carries the former expiry, not the revoke's time.
					rctx, cancel := a.opContext(cmd.Context())
					revokedAt = revokeTime(rctx, s.audit, res)
					cancel()
				}
				return a.printOutcomeRevokedAt(explainNotOwner(res, "", token, time.Now()), err, revokedAt)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	f.StringVar(&reason, "reason", "", "why, for the audit trail (required)")
	f.StringVar(&actor, "actor", a.defaultOwner, "who is revoking, for the audit trail")
	intVar(f, &token, "token", 0, "revoke only the lease with this token (0: whatever lease is live)")
	f.StringVar(&reqID, "request-id", "", "idempotency key (default: random)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (a *app) healthCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Check that the store answers (exit 0 healthy, 5 otherwise)",
		Long: `Open the store and ask it to serve. Exit 0 and status healthy when it answers;
exit 5 (unavailable or timeout) when it cannot be reached, refuses service,
or is a PostgreSQL schema that was never migrated. Through a served store
(--dsn http://...) it also makes one authenticated call, so a token in
$` + EnvAPIToken + ` that the server refuses exits 7, as for every command.`,
		Example: `  leasectl health --dsn postgres://leasestore@db:5432/leases -o json`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd, readAccess, func() error { return nil }, func(ctx context.Context, s *store) error {
				start := time.Now()
				if err := s.rt.Health(ctx); err != nil {
					return failWith(err)
				}
				latency := time.Since(start)
				if a.output == "json" {
					a.printJSON(healthJSON{
						Status: StatusHealthy, Backend: s.backend, Store: s.shown,
						LatencyMS: float64(latency.Microseconds()) / 1000,
					})
				} else {
					a.printText("healthy: " + s.backend + " store " + s.shown + " answered in " + latency.Round(time.Microsecond).String() + "\n")
				}
				return nil
			})
		},
	}
}

// healthJSON is the output of health.
type healthJSON struct {
	Status    string  `json:"status"`
	Backend   string  `json:"backend"`
	Store     string  `json:"store"`
	LatencyMS float64 `json:"latency_ms"`
}
