package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// gcJSON is the output of gc.
type gcJSON struct {
	Status  string `json:"status"` // "ok"
	Removed int    `json:"removed"`
}

// gcTimeout bounds a whole gc: it runs in batches, each its own statement.
const gcTimeout = time.Hour

func (a *app) gcCommand() *cobra.Command {
	var (
		grace time.Duration
		batch int
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove the rows of leases that ended (expired, released, revoked) more than --grace ago",
		Long: `Remove now, in batches, the rows of leases that expired, or were released or
revoked, more than --grace ago: what every process using the store does in
the background anyway (every minute, rows that ended over an hour ago), for
operators who want it done now.

Fencing is unaffected: a key acquired after its row is gone still gets a
greater token (on PostgreSQL a row goes only once the fencing sequence has
passed its token, and never while the sequence caches values; the row of
the greatest token stays, to repair a sequence that lost its state). The audit
trail is untouched. The former holder of a removed lease hears not_found
rather than expired from renew and release.`,
		Example: `  leasectl gc
  leasectl gc --grace 0s -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch <= 0 {
				return usageError("--batch: must be positive, got %d", batch)
			}
			s, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close(a)
			ctx, cancel := context.WithTimeout(cmd.Context(), gcTimeout)
			defer cancel()
			total := 0
			for {
				opCtx, opCancel := a.opContext(ctx)
				var res protocol.SweepResult
				ok, err := through(opCtx, s, protocol.OpSweep, func(ctx context.Context, sw protocol.Sweeper) (err error) {
					res, err = sw.Sweep(ctx, batch, grace)
					return err
				})
				opCancel()
				if !ok && err == nil {
					return cannot(s, "gc: the %s store does not sweep", s.backend)
				}
				n := res.Removed
				total += n
				if err != nil {
					if total > 0 {
						a.log.Warn("gc stopped part way; run it again to finish", "removed", total)
					}
					return failWith(err)
				}
				if n > 0 {
					a.log.Debug("gc: batch", "removed", n)
				}
				if n < batch && res.SetAside < batch {
					break
				}
			}
			if a.output == "json" {
				a.printJSON(gcJSON{Status: "ok", Removed: total})
				return nil
			}
			a.printText(fmt.Sprintf("removed %d rows of ended leases\n", total))
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(newZeroDurationFlag(&grace, protocol.DefaultSweepGrace, 0), "grace", "keep rows of leases that ended less than this long ago (0: remove every ended lease's row)")
	intVar(f, &batch, "batch", 10000, "rows removed per statement")
	return cmd
}
