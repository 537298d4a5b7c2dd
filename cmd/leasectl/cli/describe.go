package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// describeJSON is describe's JSON output: the get result's fields, and the
// key's newest audit records, oldest first.
type describeJSON struct {
	resultJSON
	Records []recordJSON `json:"records"`
}

func (a *app) describeCommand() *cobra.Command {
	var (
		ns     string
		recent int
	)
	cmd := &cobra.Command{
		Use:   "describe KEY",
		Short: "Show the lease on a key and its latest audit records",
		Long: `Show the live lease on KEY (as get does) and the key's latest state changes
from the audit trail, oldest first: who took it, renewed, released or revoked it
and when. Exit codes are get's: 4 when no lease is live, with the history still
shown (and, while a lock-delay keeps the key, the ended lease, as get shows it).`,
		Example: `  leasectl describe scan/10.0.0.0-24
  leasectl describe shard-7 -n billing --records 50 -o json`,
		Args: exactArgs(1, "one KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.GetRequest{Key: key}
			check := func() error {
				if recent < 1 || recent > 1000 {
					return fmt.Errorf("--records: want 1 to 1000, got %d", recent)
				}
				probe := req
				probe.RequestID = orProbe("")
				return probe.Validate()
			}
			return a.withStore(cmd, readAccess, check, func(ctx context.Context, s *store) error {
				res, err := s.rt.Get(ctx, req)
				if cut := readCutOff(cmd.Context(), res.Status, err); cut != nil {
					return cut
				}
				if !answered(res.Status) {
					return a.printOutcome(res, err)
				}
				recs, err := latestRecords(ctx, s.audit, req.Key, recent)
				if err != nil {
					return failWith(err)
				}
				if a.output == "json" {
					out := describeJSON{resultJSON: toResultJSON(res, a.red.redact(res.Message)), Records: []recordJSON{}}
					for _, r := range recs {
						out.Records = append(out.Records, toRecordJSON(r))
					}
					a.printJSON(out)
				} else {
					text := formatResult(res, a.red.redact(res.Message), time.Now(), time.Time{})
					if len(recs) == 0 {
						text += "\nno audit records of this key\n"
					} else {
						text += fmt.Sprintf("\nlatest %d audit records of this key:\n", len(recs)) + formatRecords(recs, false)
					}
					a.printText(text)
				}
				if res.Status.Success() {
					return nil
				}
				return reported{status: string(res.Status)}
			})
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	intVar(cmd.Flags(), &recent, "records", 10, "how many of the latest audit records to show (1 to 1000)")
	return cmd
}

// latestRecords reads key's trail page by page and returns its last n
// records, oldest first, holding at most n of them at a time.
func latestRecords(ctx context.Context, r audit.Reader, key protocol.Key, n int) ([]audit.Record, error) {
	q := audit.Query{Namespace: key.Namespace, Key: key.Name, Limit: audit.MaxLimit}
	ring := make([]audit.Record, 0, n)
	start := 0 // index of the oldest record once ring is full
	for {
		page, err := r.ReadAudit(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, rec := range page.Records {
			if len(ring) < n {
				ring = append(ring, rec)
				continue
			}
			ring[start] = rec
			start = (start + 1) % n
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	return append(ring[start:], ring[:start]...), nil
}
