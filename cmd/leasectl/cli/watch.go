package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

func (a *app) watchCommand() *cobra.Command {
	var (
		q          audit.Query
		since      string
		interval   time.Duration
		ops        []string
		noRenewals bool
	)
	cmd := &cobra.Command{
		Use:   "watch [KEY]",
		Short: "Print each change of a key or a namespace as it commits",
		Long: `Print every change (acquire, renew, release, revoke) of KEY, or of the whole
namespace without KEY, as it commits, one line each (with -o json one
record object per line), until interrupted (exit 0).

watch starts from now; --since or --cursor starts earlier, printing the
changes from there first. Each record's id resumes a later watch after it:
--cursor a1.ID. -n "" watches every namespace. Changes come from the audit
trail, read as a follower, so none is skipped: on PostgreSQL a transaction
left open in the cluster holds newer changes back until it ends (watch
says so after a few seconds).

When a watched lease runs out un-renewed, watch prints an expire event (op
expire, status expired, at its expires_at): when that time passes, watch
asks the store, whose clock judges expiry, whether the lease still holds,
once it has read every change of the key in the trail (a lease released
or revoked is never reported expired). The leases watched are those it
reads taken or renewed and those live when it starts.
--no-renewals leaves renewals out; --op prints only the ops named
(acquire, renew, release, revoke, expire; repeat it or separate by commas;
renew not with --no-renewals).

Order: changes print in the trail's order (by id, as they committed),
not sorted by at, with --since and from now alike. An expire event is
computed, not recorded: it prints after every change of its key up to the
one that set the expiry and before any later change of the key: just
before the acquire that took the key over, or, when none, once the store
confirmed it (two --interval after its at at the earliest). Changes of
other keys timed after the expiry may print before it, so
at can go backwards at an expire event, and its id (that of the change
that set the expiry) is an earlier one. Sort by at yourself for time order.`,
		Example: `  leasectl watch nightly-report
  leasectl watch -n billing -o json | jq -r '"\(.op) \(.key) \(.owner)"'
  leasectl watch scan/10.0.0.0-24 --since 1h
  leasectl watch -n jobs --no-renewals
  leasectl watch nightly-report --op expire,revoke`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("expected at most one KEY, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				k, err := filterKeyArg(cmd, q.Namespace, args[0])
				if err != nil {
					return err
				}
				q.Namespace, q.Key = k.Namespace, k.Name
			}
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			if err := q.Validate(); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			show, err := parseWatchOps(ops, noRenewals)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := a.openStoreFor(ctx, followAccess)
			if err != nil {
				return err
			}
			defer s.close(a)
			cfg := &audit.WatchConfig{Interval: interval, ReadTimeout: a.timeout, HeldBack: a.heldBackNotice()}
			if q.Cursor, err = audit.Start(ctx, s.audit, q, cfg); err != nil {
				return failWith(err)
			}
			a.log.Info("watch: following changes", "namespace", q.Namespace, "key", q.Key, "after", q.Cursor)
			expiries := newExpiryWatch()
			a.seedExpiries(ctx, s, q, expiries)
			emit := func(rec audit.Record) {
				if show != nil && !show[rec.Op] {
					return
				}
				if a.output == "json" {
					a.printJSON(toRecordJSON(rec))
				} else {
					a.printText(formatRecordLine(rec))
				}
			}
			return a.followWithExpiries(ctx, s, q, cfg, expiries, emit)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&q.Namespace, "namespace", "n", protocol.DefaultNamespace, `namespace ("" for every namespace, without KEY)`)
	allNamespacesFlag(cmd, &q.Namespace)
	f.StringVar(&since, "since", "", "print the changes since then first: a duration back from now (15m, 2d), an RFC 3339 time or a date")
	f.StringVar(&q.Cursor, "cursor", "", "resume after this record: a1.ID, ID a printed record's id")
	f.Var(newDurationFlag(&interval, audit.DefaultWatchInterval, positive, 0), "interval", "pause between reads of the trail while caught up")
	f.StringSliceVar(&ops, "op", nil, "print only these ops: acquire, renew, release, revoke, expire (default: all)")
	f.BoolVar(&noRenewals, "no-renewals", false, "leave renewals out")
	return cmd
}

// heldBackNotice returns a WatchConfig.HeldBack that warns once per stall
// when the watch has been held back for heldBackNotice.
func (a *app) heldBackNotice() func(time.Duration) {
	said := false
	return func(d time.Duration) {
		switch {
		case d < heldBackNotice:
			said = false
		case !said:
			said = true
			a.log.Warn("watch: newer changes are held back behind a transaction that is still in progress "+
				"(on PostgreSQL, any transaction of the cluster that began before them); they follow once it ends",
				"waiting", d.Round(time.Second))
		}
	}
}

// followWithExpiries prints q's changes as audit.Watch yields them and,
// between them, the expiries of the leases they took or renewed (see
// expiryWatch), seeded by the caller. An expiry is judged a little after
// the lease's expires_at (two watch intervals), when no record already
// read waits to be printed, and only when the trail holds no change of the
// key that the watch has yet to read (a watch catching up with --since, or
// held back on PostgreSQL, would otherwise report a lease released in
// those records as expired). The first read must succeed; a later failure
// the watch goes on after is logged as retried, and one it ends on (an
// invalid query or token, an etcd follower whose revision was compacted, a
// cursor behind a prune, an event the client cannot read, a closed store:
// exit 5) fails the command, unlogged (see failureLog).
func (a *app) followWithExpiries(ctx context.Context, s *store, q audit.Query, cfg *audit.WatchConfig,
	expiries *expiryWatch, emit func(audit.Record)) error {
	if err := a.probeAudit(ctx, s.audit, q); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan followItem)
	wcfg := *cfg
	wcfg.Passed = func(cursor string) { // called in feed's goroutine
		select {
		case items <- followItem{passed: cursor}:
		case <-ctx.Done():
		}
	}
	go feed(ctx, items, audit.Watch(ctx, s.audit, q, &wcfg))
	failures := a.newFailureLog("watch")
	defer failures.stop()
	margin := 2 * cfg.Interval
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	expiries.after(q.Cursor)
	var last error // the last failure, while no record followed it
	for {
		// A record already read comes before any expiry is judged.
		var it followItem
		var ok, got bool
		select {
		case it, ok = <-items:
			got = true
		default:
		}
		if !got {
			timer.Stop()
			if at, ok := expiries.next(); ok {
				timer.Reset(max(time.Until(at.Add(margin)), 0))
			}
			select {
			case it, ok = <-items:
			case <-failures.due():
				failures.wentOn()
				continue
			case <-timer.C:
				gctx, gcancel := context.WithTimeout(ctx, a.timeout)
				for _, ev := range expiries.due(gctx, s.rt, s.audit, time.Now().Add(-margin), margin) {
					emit(ev)
				}
				gcancel()
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if !ok {
			if last != nil && ctx.Err() == nil {
				return failWith(last)
			}
			return nil
		}
		if it.err != nil {
			last = it.err
			failures.failed(it.err)
			continue
		}
		failures.wentOn()
		if it.passed != "" {
			a.log.Debug("watch: read on past records the watch does not select", "cursor", it.passed)
			expiries.passed(it.passed)
			continue
		}
		last = nil
		for _, ev := range expiries.record(it.rec) {
			emit(ev)
		}
		emit(it.rec)
	}
}

// seedExpiries tracks the leases live when a watch starts (from now or
// earlier: a lease taken before --since runs out while it watches too):
// the key's, or up to a few pages of the namespace's (none for every
// namespace).
func (a *app) seedExpiries(ctx context.Context, s *store, q audit.Query, w *expiryWatch) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	switch {
	case q.Key != "":
		if res, err := s.rt.Get(ctx, protocol.GetRequest{Key: protocol.Key{Namespace: q.Namespace, Name: q.Key}}); err == nil && res.Lease != nil {
			w.seed(*res.Lease)
		}
	case q.Namespace != "":
		req := protocol.ListRequest{Namespace: q.Namespace, Limit: protocol.MaxListLimit}
		for range 10 {
			res, err := s.rt.List(ctx, req)
			if err != nil {
				return
			}
			for _, l := range res.Leases {
				w.seed(l)
			}
			if req.Cursor = res.NextCursor; req.Cursor == "" {
				return
			}
		}
	}
}
