package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

func (a *app) watchCommand() *cobra.Command {
	var (
		q        audit.Query
		since    string
		interval time.Duration
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
says so after a few seconds).`,
		Example: `  leasectl watch nightly-report
  leasectl watch -n billing -o json | jq -r '"\(.op) \(.key) \(.owner)"'
  leasectl watch scan/10.0.0.0-24 --since 1h`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("expected at most one KEY, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				q.Key = args[0]
			}
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			if err := q.Validate(); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			if interval <= 0 {
				return usageError("--interval: must be positive, got %v", interval)
			}
			ctx := cmd.Context()
			s, err := a.openStoreFor(ctx, readAccess)
			if err != nil {
				return err
			}
			defer s.close(a)
			cfg := &audit.WatchConfig{Interval: interval, ReadTimeout: a.timeout, HeldBack: a.heldBackNotice()}
			if q.Cursor, err = audit.Start(ctx, s.audit, q, cfg); err != nil {
				return failWith(err)
			}
			a.log.Info("watch: following changes", "namespace", q.Namespace, "key", q.Key, "after", q.Cursor)
			first := true
			for rec, err := range audit.Watch(ctx, s.audit, q, cfg) {
				switch {
				case err != nil && first:
					return failWith(err)
				case err != nil:
					a.log.Warn("watch: read failed; retrying", "err", a.red.redact(err.Error()))
					continue
				}
				first = false
				if a.output == "json" {
					a.printJSON(toRecordJSON(rec))
				} else {
					a.printText(formatRecordLine(rec))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&q.Namespace, "namespace", "n", protocol.DefaultNamespace, `namespace ("" for every namespace, without KEY)`)
	allNamespacesFlag(cmd, &q.Namespace)
	f.StringVar(&since, "since", "", "print the changes since then first: a duration back from now (15m, 2d), an RFC 3339 time or a date")
	f.StringVar(&q.Cursor, "cursor", "", "resume after this record: a1.ID, ID a printed record's id")
	f.Var(newDurationFlag(&interval, audit.DefaultWatchInterval), "interval", "pause between reads of the trail while caught up")
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
