package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// fencingRaiseJSON is the output of fencing raise.
type fencingRaiseJSON struct {
	Status string `json:"status"` // "ok"
	Floor  int64  `json:"floor"`  // every later token is greater
}

func (a *app) fencingCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "fencing",
		Short:   "Operate on the store's fencing tokens (after a restore: fencing raise)",
		Example: `  leasectl fencing raise`,
		Args:    exactArgs(0, "a subcommand: raise"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("fencing: expected a subcommand: raise")
		},
	}
	cmd.AddCommand(a.fencingRaiseCommand())
	return cmd
}

func (a *app) fencingRaiseCommand() *cobra.Command {
	var by int64
	cmd := &cobra.Command{
		Use:   "raise",
		Short: "Make every later token greater than any issued before a restore",
		Long: `Run this after the store was brought back to an earlier point: a backup or
a point-in-time recovery restored, a copy of the SQLite file put back, an
asynchronous standby promoted without the primary's last commits. Such a
store has forgotten the tokens it issued after that point and would issue
them again, while the holders of the forgotten leases and the resources
they wrote to still know them: a resource could take a write of the new
holder and of the old one under the same token.

raise moves the fencing counter (PostgreSQL: leasestore_fencing_seq;
SQLite: the leasestore_fencing row) --by past the greatest token the store
holds, so every later token is greater than any issued since the restored
point as long as fewer than --by were. Run it before the services start
again, or at once if they run.

In the same transaction it moves the audit trail's ids --by past the
greatest the trail holds (PostgreSQL: the offset in leasestore_audit_era;
SQLite: AUTOINCREMENT's counter): the restore took them back too, and the
records written from now on would get again the ids of those written
after the restored point, which followers (audit --follow, watch, follow
streams, resumed exports) already read past and would skip. On PostgreSQL
an id is its writer's transaction id plus that offset, so --by must also
exceed the transaction ids the cluster assigned since the restored point.
Leases and the audit records are untouched.

An etcd store's tokens come from the cluster's revision: restore its
snapshot with 'etcdutl snapshot restore --bump-revision' instead.`,
		Example: `  leasectl fencing raise --dsn "$DSN"
  leasectl fencing raise --by 10000000 -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var bad *protocol.Error
			if errors.As(protocol.CheckTokenRaise(by), &bad) {
				return usageError("--by: %s", bad.Message)
			}
			s, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close(a)
			ctx, cancel := a.opContext(cmd.Context())
			defer cancel()
			var floor int64
			ok, err := through(ctx, s, protocol.OpRaiseTokens, func(ctx context.Context, r protocol.TokenRaiser) (err error) {
				floor, err = r.RaiseTokens(ctx, by)
				return err
			})
			if !ok && err == nil {
				if s.backend == "etcd" {
					return cannot(s, "fencing raise: an etcd store's tokens come from the cluster's revision: "+
						"restore its snapshot with etcdutl snapshot restore --bump-revision")
				}
				return cannot(s, "fencing raise: the %s store keeps no fencing counter to raise", s.backend)
			}
			if err != nil {
				return failWith(err)
			}
			a.log.Info("fencing counter raised", "floor", floor, "by", by)
			if a.output == "json" {
				a.printJSON(fencingRaiseJSON{Status: "ok", Floor: floor})
				return nil
			}
			a.printText(fmt.Sprintf("every token issued from now on is greater than %d\n", floor))
			return nil
		},
	}
	intVar(cmd.Flags(), &by, "by", protocol.DefaultTokenRaise,
		"how far past the greatest token (and audit id) held to move the counters: more than the tokens (and audit ids; on PostgreSQL transaction ids) issued since the restored point")
	return cmd
}
