package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/protocol"
)

// pruneJSON is the output of audit prune.
type pruneJSON struct {
	Status  string     `json:"status"` // "pruned"
	Removed int64      `json:"removed"`
	Before  string     `json:"before"`
	Record  recordJSON `json:"record"` // the prune's own record
}

// pruneTimeout bounds a whole prune: it runs in batches, each its own
// transaction, and a long trail takes a while.
const pruneTimeout = time.Hour

func (a *app) auditPruneCommand() *cobra.Command {
	var (
		before, actor, reqID string
		yes                  bool
	)
	cmd := &cobra.Command{
		Use:   "prune --before DURATION|RFC3339 --yes",
		Short: "Remove audit records older than a time (retention); the prune itself is recorded",
		Long: `Remove every audit record older than --before, oldest first, in batches of a
few thousand records, each its own transaction, but those of a lease still
live that a retry is answered from: its acquire's and its latest renew's
record stay until the lease ends (released, revoked or expired), so that
the retry of either, whose answer was lost, replays instead of answering
conflict; a later prune removes them. This is the only way records
leave the trail: the database refuses any other UPDATE, DELETE or TRUNCATE of
it, and lets prune delete only records older than its cut-off. The prune
leaves a record of its own (op prune, status pruned, the actor, and how many
records went before which time), written with the last batch. A cut-off
after the store's time is refused (exit 2): it would remove the records
that retries of just-committed operations replay from. So is one at or
before 0001-01-01T00:00:00Z (Go's zero time, what a script prints for a
time it never set): no record is older, so it would remove nothing.

Nothing is removed without --yes. Export what you must keep first
(leasectl audit export). --before is a duration back from now (720h) or an
RFC 3339 time.`,
		Example: `  leasectl audit export > trail.jsonl && leasectl audit prune --before 720h --yes
  leasectl audit prune --before 2026-01-01T00:00:00Z --yes -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before == "" {
				return usageError("--before is required: a duration back from now (720h) or an RFC 3339 time")
			}
			cut, err := durations.ParseTime(before, time.Now())
			if err != nil {
				return usageError("--before: %v", err)
			}
			if !cut.After(time.Time{}) {
				// Given, so not "required" (audit.PruneRequest takes the
				// zero time for a cut-off never set), but nothing is older:
				// most likely a time a script never set, which Go prints so.
				return usageError("--before %s: that is not after 0001-01-01T00:00:00Z, the earliest time there is "+
					"(what a program prints for a time it never set): no record is older, so the prune would remove nothing; "+
					"give the cut-off you mean: a duration back from now (720h) or an RFC 3339 time", before)
			}
			if !yes {
				return usageError("prune removes every audit record before %s for good: add --yes to go ahead",
					cut.UTC().Format(time.RFC3339))
			}
			if reqID == "" {
				reqID = protocol.RandomRequestID()
			}
			req := audit.PruneRequest{Before: cut, Actor: actor, RequestID: reqID}
			if err := req.Validate(); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			s, err := a.openStoreFor(cmd.Context(), writeAccess)
			if err != nil {
				return err
			}
			defer s.close(a)
			ctx, cancel := context.WithTimeout(cmd.Context(), pruneTimeout)
			defer cancel()
			var res audit.PruneResult
			ok, err := through(ctx, s, audit.OpPrune, func(ctx context.Context, p audit.Pruner) (err error) {
				res, err = p.PruneAudit(ctx, req)
				return err
			})
			if err == nil && !ok {
				return cannot(s, "audit prune: the %s store cannot prune", s.backend)
			}
			if err != nil {
				if res.Removed > 0 {
					a.log.Warn("audit prune stopped part way; run it again to finish", "removed", res.Removed)
				}
				return failWith(err)
			}
			if a.output == "json" {
				a.printJSON(pruneJSON{Status: string(audit.StatusPruned), Removed: res.Removed,
					Before: timeJSON(cut), Record: toRecordJSON(res.Record)})
				return nil
			}
			a.printText(fmt.Sprintf("pruned %d audit records before %s (record %d)\n", res.Removed, timeJSON(cut), res.Record.ID))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&before, "before", "", "remove records older than this: a duration back from now (720h) or an RFC 3339 time")
	f.BoolVar(&yes, "yes", false, "confirm: the records are removed for good")
	f.StringVar(&actor, "actor", a.defaultOwner, "who prunes, for the prune's record")
	f.StringVar(&reqID, "request-id", "", "request id of the prune's record (default: a random one)")
	return cmd
}

func (a *app) auditExportCommand() *cobra.Command {
	var (
		q     audit.Query
		key   string
		since string
		ops   string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Print the audit trail as JSON lines, oldest first, one record a line",
		Long: `Print the audit trail, oldest first, as JSON lines: one record per line, in
the record shape of 'leasectl audit -o json', whatever -o says. It reads page by
page, so memory stays flat however long the trail.

Export reads as a follower does (records that may still gain an earlier
neighbour are held back), so it never skips one. To resume an export, pass
--cursor a1.ID where ID is the id of the last line you kept; the cursor to
resume after the last line printed is logged when export ends. -n defaults
to the default namespace, as for every command; -A (or -n "") exports every
namespace, with the prune records that belong to none. --since takes a duration back from now
(24h; 0s means from now on, so nothing yet) or an RFC 3339 time. --op and
--owner filter as in 'leasectl audit'; export is always oldest first.`,
		Example: `  leasectl audit export > trail.jsonl
  leasectl audit export -A > all-namespaces.jsonl
  leasectl audit export -n billing --since 2026-01-01T00:00:00Z
  leasectl audit export --cursor a1.18446 >> trail.jsonl`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			q.Limit, q.Follow = audit.MaxLimit, true
			q.Ops = audit.ParseOps(ops)
			if err := keyFilter(cmd, &q, key); err != nil {
				return err
			}
			if err := q.Validate(); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			s, err := a.openStoreFor(cmd.Context(), readAccess)
			if err != nil {
				return err
			}
			defer s.close(a)
			n, last, held, err := a.export(cmd.Context(), s.audit, q, s.unchanged)
			if err != nil {
				if last != "" {
					a.log.Warn("audit export: stopped; resume after the last line printed", "exported", n,
						"resume", "--cursor "+last)
				}
				return failWith(err)
			}
			switch {
			case held:
				a.log.Warn("audit export: newer records are held back behind a transaction still in progress; resume later",
					"exported", n, "resume", "--cursor "+last)
			case last != "":
				a.log.Info("audit export: done", "exported", n, "resume", "--cursor "+last)
			default:
				a.log.Info("audit export: no records", "exported", n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&q.Namespace, "namespace", "n", protocol.DefaultNamespace, `namespace ("" for every namespace)`)
	allNamespacesFlag(cmd, &q.Namespace)
	f.StringVar(&key, "key", "", "only records of this key: NS/NAME, or NAME (in -n's namespace, else default)")
	f.StringVar(&since, "since", "", "only records at or after this: a duration back from now (24h) or an RFC 3339 time")
	f.StringVar(&q.Cursor, "cursor", "", "resume after this record: a1.ID, ID the id of the last line kept")
	f.Var(opsFlag{&ops}, "op", "only records of these operations, comma-separated or repeated: acquire, renew, release, revoke, prune")
	f.StringVar(&q.Owner, "owner", "", "only records of this lease owner (exact)")
	_ = cmd.RegisterFlagCompletionFunc("op", completeOps)
	return cmd
}

// export prints the trail from q as JSON lines until the end or the first
// line that could not be written, and returns how many records it printed,
// the cursor after the last, and whether it stopped at records held back. unchanged, when not nil, is checked after
// each page is read (or its read failed) and before it is printed (see
// store.unchanged).
func (a *app) export(ctx context.Context, r audit.Reader, q audit.Query, unchanged func(error) error) (n int64, last string, held bool, err error) {
	last = q.Cursor
	for {
		opCtx, cancel := a.opContext(ctx)
		page, err := r.ReadAudit(opCtx, q)
		cancel()
		if unchanged != nil {
			// After a failed read too: a file changed under a read without
			// locks can fail it as "malformed", which is then no fault of
			// the store.
			err = unchanged(err)
		}
		if err != nil {
			return n, last, false, err
		}
		for _, rec := range page.Records {
			if err := a.writeJSON(toRecordJSON(rec)); err != nil {
				// Stdout is closed (or full): n and last stay at the last
				// line written, so the resume cursor logged skips nothing.
				return n, last, false, err
			}
			n++
			last = audit.EncodeCursor(rec.ID)
		}
		if len(page.Records) < q.EffectiveLimit() {
			return n, last, page.HeldBack, nil
		}
		q.Cursor = last
	}
}
