package cli

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// parseSince reads --since (or --before): the time grammar the CLI and
// the HTTP API share (package durations): a duration back from now by this
// machine's clock (15m, 36h, 2d; 0s is now), an RFC 3339 time, or a date
// (midnight UTC).
func parseSince(s string, now time.Time) (time.Time, error) {
	t, err := durations.ParseTime(s, now)
	if err != nil {
		return time.Time{}, usageError("--since: %v", err)
	}
	return t, nil
}

// auditOrder sets q.Newest from --order: given, as said (newest or oldest;
// newest with --follow is refused); not given, oldest first for a follower,
// else the order of q.Cursor when there is one, else newest first. A
// follower given a newest-first page's cursor thus reads it oldest first,
// which q.Validate refuses before the store is opened, as watch and audit
// export refuse that cursor.
func auditOrder(q *audit.Query, order string, given, follow bool) error {
	switch {
	case given && order == "newest":
		if follow {
			return usageError("--order newest: --follow prints records as they come, oldest first; drop --order or use --order oldest")
		}
		q.Newest = true
	case given && order == "oldest":
		q.Newest = false
	case given:
		return usageError("--order: %q is neither newest nor oldest", order)
	case q.Cursor != "" && !follow:
		q.Newest = audit.IsNewestCursor(q.Cursor)
	default:
		q.Newest = !follow
	}
	return nil
}

// keyFilter reads --key (key, the flag's text) into q as every KEY is read
// (filterKeyArg): NS/NAME without -n, the name in NS as written with it.
// The flag keeps its text, so that the next page's command
// (nextPageCommand) repeats the key as written, namespace included. Only
// a --key not given means no filter: --key "" (a script's unset $KEY) is
// refused as get "" is.
func keyFilter(cmd *cobra.Command, q *audit.Query, key string) error {
	if f := cmd.Flags().Lookup("key"); key != "" || (f != nil && f.Changed) {
		k, err := filterKeyArg(cmd, q.Namespace, key)
		if err != nil {
			return err
		}
		q.Namespace, q.Key = k.Namespace, k.Name
	}
	return nil
}

// filterKeyArg reads the key that filters a read of the trail (audit
// --key, watch KEY) in namespace ns, as every KEY is read (keyArg); -A
// beside a key was refused before (allNamespacesFlag). A key without a
// name (NS/, or "") is invalid input, as get refuses it: an empty name in
// the query would filter nothing.
func filterKeyArg(cmd *cobra.Command, ns, arg string) (protocol.Key, error) {
	k, err := keyArg(cmd, ns, arg)
	if err != nil {
		return k, err
	}
	if err := textfield.Validate("key", k.Name, protocol.MaxNameLen); err != nil {
		return protocol.Key{}, &failure{status: string(protocol.StatusInvalid), err: err}
	}
	return k, nil
}

// completeOps completes --op: the recorded ops not yet in the
// comma-separated list being typed, each after that list.
func completeOps(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	head := ""
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		head = toComplete[:i+1]
	}
	given := audit.ParseOps(head)
	var out []string
	for _, op := range audit.RecordedOps {
		if !slices.Contains(given, op) {
			out = append(out, head+string(op))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// opsFlag is --op of audit and audit export: comma-separated ops, and
// given again, more of them (as watch's --op), never the last one alone.
// Its String is the comma-separated list, as the next page's command
// writes it.
type opsFlag struct{ s *string }

func (f opsFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f opsFlag) Set(v string) error {
	if *f.s != "" {
		v = *f.s + "," + v
	}
	*f.s = v
	return nil
}

func (f opsFlag) Type() string { return "string" }

func (a *app) auditCommand() *cobra.Command {
	var (
		q         audit.Query
		key       string
		since     string
		ops       string
		order     string
		follow    bool
		noHeaders bool
		interval  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail (every acquire, renew, release and revoke)",
		Long: `Read the append-only audit trail of the store, newest first: every state change
that took effect, with the lease's owner and token, the request id, the actor
and, for revoke, the reason.

One page is printed (--limit records) with a cursor for the next one, which
goes on to older records. --order oldest reads from the start of the trail
instead; a cursor is read in the order of the page that printed it (without
--order, leasectl reads it so). --op keeps the records of some operations
(comma-separated: acquire, renew, release, revoke, prune), --owner those of
one lease owner (exactly; a revoke's record carries the revoked owner).

With --follow, leasectl prints records as they are committed from now on,
oldest first, polling every --interval, until interrupted (exit 0); with
--since or --cursor it prints the records from there first, then follows
(--order newest with --follow is refused). In JSON mode it prints one object
per page that has records, one per line. -n "" reads every namespace.

--since takes a duration back from now (15m, 36h, 2d; 0s is now) or a
time: RFC 3339 (2026-01-02T15:04:05Z) or a UTC date (2026-01-02).`,
		Example: `  leasectl audit --key scan/10.0.0.0-24 --since 1h
  leasectl audit -n billing --op revoke,release --owner worker-3
  leasectl audit -n billing --since 2026-01-02T15:04:05Z --order oldest -o json
  leasectl audit --follow
  leasectl audit --follow --op acquire --since 1h -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("interval") && !follow {
				// A poll interval without polling would be ignored.
				return usageError("--interval: only with --follow")
			}
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			if !q.Since.IsZero() {
				// The next page's command carries the time --since meant
				// now: a duration, read again later, would drop the oldest
				// records of the pages still to come.
				_ = cmd.Flags().Set("since", q.Since.UTC().Format(time.RFC3339Nano))
			}
			q.Ops = audit.ParseOps(ops)
			if err := keyFilter(cmd, &q, key); err != nil {
				return err
			}
			if err := auditOrder(&q, order, cmd.Flags().Changed("order"), follow); err != nil {
				return err
			}
			if err := q.Validate(); err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			acc := readAccess
			if follow {
				acc = followAccess
			}
			s, err := a.openStoreFor(cmd.Context(), acc)
			if err != nil {
				return err
			}
			defer s.close(a)
			if follow {
				if since == "" && q.Cursor == "" {
					// From now on: the history is what audit without
					// --follow (or --since / --cursor) is for.
					if q, err = a.tail(cmd.Context(), s.audit, q); err != nil {
						return failWith(err)
					}
					a.log.Info("audit: following new records (--since or --cursor prints earlier ones first)")
				} else {
					a.log.Info("audit: following", "since", since, "cursor", q.Cursor)
				}
				return a.followAudit(cmd.Context(), s.audit, q, interval)
			}
			ctx, cancel := a.opContext(cmd.Context())
			defer cancel()
			return a.readOnce(s, func() error {
				page, err := s.audit.ReadAudit(ctx, q)
				if err != nil {
					return failWith(err)
				}
				if a.output == "json" {
					a.printJSON(toAuditJSON(page))
					return nil
				}
				if len(page.Records) == 0 {
					a.printEmpty("no audit records\n", noHeaders)
					return nil
				}
				a.printText(formatRecords(page.Records, noHeaders))
				a.morePages(cmd, page.NextCursor, noHeaders)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&q.Namespace, "namespace", "n", protocol.DefaultNamespace, `namespace ("" for every namespace)`)
	allNamespacesFlag(cmd, &q.Namespace)
	f.StringVar(&key, "key", "", "only records of this key: NS/NAME, or NAME in -n's namespace")
	f.StringVar(&since, "since", "", "only records at or after this: a duration back from now (15m, 2d), an RFC 3339 time or a date")
	intVar(f, &q.Limit, "limit", audit.DefaultLimit, "page size, at most 1000 (0: the default, 100)")
	f.StringVar(&q.Cursor, "cursor", "", "next_cursor of the previous page")
	f.Var(opsFlag{&ops}, "op", "only records of these operations, comma-separated or repeated: acquire, renew, release, revoke, prune")
	f.StringVar(&q.Owner, "owner", "", "only records of this lease owner (exact)")
	f.StringVar(&order, "order", "", "newest or oldest first (default: newest; with --follow oldest, which is the only order it takes)")
	f.BoolVarP(&follow, "follow", "f", false, "keep polling for new records until interrupted")
	f.BoolVar(&noHeaders, "no-headers", false, "table output: no header line (the next page's command goes to stderr)")
	f.Var(newDurationFlag(&interval, time.Second, positive, 0), "interval", "poll interval of --follow (only with it)")
	_ = cmd.RegisterFlagCompletionFunc("op", completeOps)
	_ = cmd.RegisterFlagCompletionFunc("order", cobra.FixedCompletions([]string{"newest", "oldest"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(a.auditPruneCommand(), a.auditExportCommand())
	return cmd
}

func toAuditJSON(page audit.Page) auditJSON { return wire.FromPage(page) }

// tail returns q positioned after the last record of the trail that q
// selects, so that a follower prints only records written from now on
// (see [audit.Tail]).
func (a *app) tail(ctx context.Context, r audit.Reader, q audit.Query) (audit.Query, error) {
	cursor, err := audit.Tail(ctx, r, q, &audit.WatchConfig{ReadTimeout: a.timeout})
	if err != nil {
		return q, err
	}
	q.Cursor = cursor
	return q, nil
}

// heldBackNotice is how long a follower waits on records held back before
// it says so.
const heldBackNotice = 5 * time.Second

// followAudit polls the trail from q until ctx is cancelled. The first read
// must succeed; later failures are logged and retried at the next poll, so a
// follower rides out a database restart, except a cursor behind a prune
// (audit.ErrPruned), which fails the command (exit 5, unavailable, as an
// etcd follower whose revision was compacted), and a backend that refuses
// every operation until restarted (protocol.ErrRestartRequired: a SQLite
// file put back under it), which fails it too (exit 5), naming the fix.
//
// --since without --cursor is turned into the cursor before the first
// record at or after it ([audit.Start]): a store that streams its trail
// (etcd) follows from a cursor, from the start of the trail without one,
// and ignores Since.
func (a *app) followAudit(ctx context.Context, r audit.Reader, q audit.Query, interval time.Duration) error {
	q.Follow = true // never skip a record that commits out of id order
	if q.Cursor == "" && !q.Since.IsZero() {
		start, err := audit.Start(ctx, r, q, &audit.WatchConfig{ReadTimeout: a.timeout})
		if err != nil {
			return failWith(err)
		}
		q.Cursor = start
	}
	if f, ok := audit.FollowerOf(r); ok {
		if err := a.probeAudit(ctx, r, q); err != nil {
			return err
		}
		return a.streamAudit(ctx, f, q)
	}
	first := true
	var heldSince time.Time // when the follower began to wait on a transaction in progress
	for {
		opCtx, cancel := a.opContext(ctx)
		page, err := r.ReadAudit(opCtx, q)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (first || errors.Is(err, audit.ErrPruned) || errors.Is(err, protocol.ErrRestartRequired)):
			// A cursor behind a prune stays behind it: reading again
			// cannot help, and the records after it are gone. A backend
			// that must be restarted refuses every read until then.
			return failWith(err)
		case err != nil:
			a.log.Warn("audit: read failed; retrying", "err", a.red.redact(err.Error()))
		default:
			first = false
			switch {
			case !page.HeldBack:
				heldSince = time.Time{}
			case heldSince.IsZero():
				heldSince = time.Now()
			case time.Since(heldSince) > heldBackNotice:
				// Said once per stall: the follower is not stuck, it waits.
				a.log.Warn("audit: newer records are held back behind a transaction that is still in progress "+
					"(on PostgreSQL, any transaction of the cluster that began before them); they follow once it ends",
					"waiting", time.Since(heldSince).Round(time.Second))
				heldSince = time.Now().Add(time.Hour)
			}
			if len(page.Records) > 0 {
				if a.output == "json" {
					// Each line carries the cursor to resume after it, so
					// a script can restart the follow where it stopped.
					out := toAuditJSON(page)
					out.NextCursor = audit.EncodeCursor(page.Records[len(page.Records)-1].ID)
					a.printJSON(out)
				} else {
					text := ""
					for _, rec := range page.Records {
						text += formatRecordLine(rec)
					}
					a.printText(text)
				}
			}
			// A Reader may answer NextCursor "" at the end of the trail;
			// the follower resumes after the last record it printed, or
			// past the records of other keys (ops, owners) the read passed
			// over, so that a prune of those leaves it ahead of the prune.
			q.Cursor = page.Resume(q.Cursor)
			if page.NextCursor != "" {
				continue // more records are waiting: no pause
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// probeAudit reads one record of q, as a follower does, and returns the
// failure (for failWith's exit code) when the read fails: a follow's first
// read must succeed, while a stream (or audit.Watch) yields its failures
// and goes on, retrying, so this read decides whether the store answers
// (and the query and cursor are good) at all.
func (a *app) probeAudit(ctx context.Context, r audit.Reader, q audit.Query) error {
	q.Limit, q.Follow = 1, true
	opCtx, cancel := a.opContext(ctx)
	defer cancel()
	if _, err := r.ReadAudit(opCtx, q); err != nil && ctx.Err() == nil {
		return failWith(err)
	}
	return nil
}

// streamAudit prints the records a streaming reader (etcd's Follow, a
// served store's GET /v1/audit/follow) sends, from q.Cursor, until ctx is
// cancelled, as followAudit prints polled ones: one line, or one JSON page
// object with the cursor after it, per record. A failure the stream goes
// on after is logged as retried, as a polled follower logs a failed read;
// one that ends the stream (a refused query or token, a cursor behind a
// prune, an event the client cannot read) fails the command, unlogged
// (see failureLog).
func (a *app) streamAudit(ctx context.Context, f audit.Follower, q audit.Query) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan followItem)
	go feed(ctx, items, f.Follow(ctx, q))
	failures := a.newFailureLog("audit")
	defer failures.stop()
	var last error // the last failure, while no record followed it
	for {
		var it followItem
		var ok bool
		select {
		case it, ok = <-items:
		case <-failures.due():
			failures.wentOn()
			continue
		}
		switch {
		case !ok:
			if last != nil && ctx.Err() == nil {
				return failWith(last)
			}
			return nil
		case it.err != nil:
			last = it.err
			failures.failed(it.err)
			continue
		}
		failures.wentOn()
		last = nil
		if a.output == "json" {
			out := toAuditJSON(audit.Page{Records: []audit.Record{it.rec}})
			out.NextCursor = audit.EncodeCursor(it.rec.ID)
			a.printJSON(out)
		} else {
			a.printText(formatRecordLine(it.rec))
		}
	}
}
