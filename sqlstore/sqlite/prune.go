package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

var _ audit.Pruner = (*Backend)(nil)

// pruneBatch is how many records one prune transaction removes (a
// variable for this package's tests).
var pruneBatch int64 = 5000

// PruneAudit removes every audit record older than r.Before, oldest first,
// but those a live lease needs (qPruneBatch: the records of a live lease's
// acquire and latest renew, which a retry of either replays from, stay;
// see [audit.Pruner]), pruneBatch records per write transaction, each
// batch reading on from the greatest id the one before it took (so a kept
// record is read once a prune, and a lease that ends during the prune
// keeps what it kept until the next prune), each batch writing a prune
// record in its transaction (pruneRecord; the last batch's carries the
// request id and counts the whole prune: see [audit.Pruner]). Batches that committed before the prune
// stopped stay done: a prune that stops early answers an error and, in
// the result's Removed, the records its committed batches removed; the
// error says how many too (stoppedAfter). A batch that could not delete
// every record it took, or mark each as removed (a trigger of the
// operator's on the trail kept some, or kept the store's mark from
// firing, on a schema newer than this release's that judges triggers by
// name only), removes none of them and stops the prune, naming the
// trigger: it never passes a record older than the cut-off, nor takes a
// short batch for the last. Each batch claims the request id for this
// run before it removes anything (claimPruneID): of two prunes with one
// request id at once, one removes records and its record counts them
// all, and the other removes nothing and answers invalid, as a prune
// whose request id is in the trail does (see [backendkit.PruneIDUsed]).
// A prune that stops early frees its claim, so that it can be sent again
// with its id; a claim left by a prune whose process died keeps the id
// refused as used. A cut-off after the backend's clock (see
// [backendkit.PruneCutOff]) answers invalid. While a trigger that
// the migrations created is missing or altered (above all
// leasestore_audit_pruned_through, which marks what a prune removed for
// the followers behind it), or a trigger they did not make is on the
// store's tables (on a newer schema, one not named leasestore_, which
// this release takes for that schema's own), every batch is refused before
// it removes anything, with unavailable naming the trigger and the fix,
// as Health refuses the file.
//
// A ctx without a deadline gets no default: a long prune may rightly take
// long (see [audit.Pruner]).
func (b *Backend) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	if err := backendkit.CheckPrune(r); err != nil {
		return audit.PruneResult{}, err
	}
	var err error
	if r.Before, err = backendkit.PruneCutOff(r.Before, b.clock()); err != nil {
		return audit.PruneResult{}, err
	}
	if err := b.callRefusal(audit.OpPrune); err != nil {
		return audit.PruneResult{}, err
	}
	if prior, err := scanRecorded(b.stmts.findRequest.QueryRowContext(ctx, "", r.RequestID)); err == nil && prior.ID != 0 {
		return audit.PruneResult{}, backendkit.PruneIDUsed(r.RequestID)
	}
	run := protocol.RandomRequestID()
	var (
		res audit.PruneResult
		// cursor is the greatest id the committed batches took: the next
		// batch reads on from it, past the records live leases keep.
		cursor int64
	)
	for {
		var (
			n    int64
			rec  *backendkit.Recorded
			next int64 // the greatest id the batch took
			// unclaim: the run's claim stands after this write (see after);
			// decided: who frees it, the caller (callerFrees) or, when the
			// caller left while the batch ran the write, after (afterFrees).
			unclaim atomic.Bool
			decided atomic.Int32
		)
		removed := res.Removed
		// after has the write's real outcome: a batch that committed and
		// was not the last leaves the claim its run holds, and so does
		// one that failed (removing nothing, claiming nothing) after
		// batches that committed; a last batch freed it, and a first
		// that failed took none.
		after := func(_ protocol.Result, err error) (protocol.Result, error) {
			unclaim.Store((err == nil && rec == nil) || (err != nil && removed > 0))
			if !decided.CompareAndSwap(0, callerFrees) && unclaim.Load() {
				b.drops.Go(func() { b.unclaimPrune(context.WithoutCancel(ctx), r, run) })
			}
			return protocol.Result{}, err
		}
		_, err := b.writeThen(ctx, audit.OpPrune, func(ctx context.Context, tx *sql.Tx, now time.Time) (protocol.Result, bool, error) {
			// Without its triggers (the mark above all) a batch would leave a
			// follower behind it a silent gap: refused, nothing removed. A
			// row of the window here was committed by another handle (this
			// prune opens and closes its own inside the transaction, and no
			// other write runs beside it): refused too, the row left for
			// the operator to see, not taken over.
			refusal, err := b.storeRefusal(ctx, tx, audit.OpPrune)
			if err != nil {
				return protocol.Result{}, false, err
			}
			if refusal != nil {
				return protocol.Result{}, false, refusal
			}
			if _, err := tx.ExecContext(ctx, qPruneOpen, micros(r.Before)); err != nil {
				return protocol.Result{}, false, err
			}
			if err := b.claimPruneID(ctx, tx, r, run, now, res.Removed); err != nil {
				return protocol.Result{}, false, err
			}
			taken, err := pruneTaken(ctx, tx, r.Before, now, cursor)
			if err != nil {
				return protocol.Result{}, false, err
			}
			next = taken.top[""]
			out, err := tx.ExecContext(ctx, qPruneBatch, micros(r.Before), pruneBatch, micros(now), cursor)
			if err != nil {
				var se *sqlite.Error
				if errors.As(err, &se) && foreignTrigger(se) {
					return protocol.Result{}, false, keptError(ctx, tx, func(what, fix string) *protocol.Error {
						return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, err,
							"sqlite database %q: %s refused a batch of the prune, which removed none of its records (its "+
								"message follows): run %s, then prune again", b.file, what, fix)
					})
				}
				return protocol.Result{}, false, err
			}
			if n, err = out.RowsAffected(); err != nil {
				return protocol.Result{}, false, err
			}
			if n < taken.n {
				return protocol.Result{}, false, keptError(ctx, tx, func(what, fix string) *protocol.Error {
					return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
						"sqlite database %q: a batch of the prune could delete only %d of the %d oldest records left "+
							"before its cut-off, so it removed none of them: %s kept the rest (a BEFORE DELETE trigger "+
							"that RAISE(IGNORE)s keeps its record): run %s, then prune again", b.file, n, taken.n, what, fix)
				})
			}
			marked, err := taken.marked(ctx, tx)
			if err != nil {
				return protocol.Result{}, false, err
			}
			if !marked {
				return protocol.Result{}, false, keptError(ctx, tx, func(what, fix string) *protocol.Error {
					return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
						"sqlite database %q: a batch of the prune removed none of the records it took: the mark of what "+
							"prunes removed (leasestore_audit_pruned, kept by the store's trigger "+
							"leasestore_audit_pruned_through) did not cover them all, so a follower behind them would have "+
							"read on past them: %s kept the store's trigger from firing (an AFTER DELETE trigger that "+
							"RAISE(IGNORE)s skips the triggers after it): run %s, then prune again", b.file, what, fix)
				})
			}
			if _, err := tx.ExecContext(ctx, qPruneClose); err != nil {
				return protocol.Result{}, false, err
			}
			if taken.n == pruneBatch {
				// Not the last batch: its own record, so that what it
				// removes is recorded even if the prune stops after it.
				_, err := b.recordID(ctx, tx, pruneRecord(r, now, res.Removed+n, false))
				return protocol.Result{}, err == nil, err
			}
			if _, err := tx.ExecContext(ctx, qPruneUnclaim, r.RequestID, run); err != nil {
				return protocol.Result{}, false, err
			}
			last := pruneRecord(r, now, res.Removed+n, true)
			rec = &last
			if rec.ID, err = b.recordID(ctx, tx, *rec); err != nil {
				return protocol.Result{}, false, err
			}
			return protocol.Result{}, true, nil
		}, after)
		if err != nil {
			// Unless the caller left the write to its batch (after frees
			// the claim then, in the background), after has run.
			if !decided.CompareAndSwap(0, afterFrees) && unclaim.Load() {
				b.dropPruneClaim(ctx, r, run)
			}
			return res, b.stoppedAfter(err, r, res.Removed)
		}
		res.Removed += n
		if rec != nil {
			res.Record = rec.Record
			return res, nil
		}
		cursor = next
		if b.betweenPruneBatches != nil {
			b.betweenPruneBatches()
		}
	}
}

// pruneRecord is the record of a batch of the prune r that brought what
// the prune removed to removed, written in the batch's transaction: the
// last batch's carries r's request id; every other's a request id of its
// own (the id stays free for a prune sent again after it stopped early)
// and says that it counts the prune so far (see
// [backendkit.PruneBatchReason]).
func pruneRecord(r audit.PruneRequest, now time.Time, removed int64, last bool) backendkit.Recorded {
	id, reason := r.RequestID, backendkit.PruneReason(removed, r.Before)
	if !last {
		id, reason = protocol.RandomRequestID(), backendkit.PruneBatchReason(removed, r)
	}
	return backendkit.Recorded{Record: audit.Record{At: now, Op: audit.OpPrune, RequestID: id, Actor: r.Actor,
		Reason: reason, Status: audit.StatusPruned, Version: audit.RecordFormatVersion}}
}

// claimPruneID claims r's request id for the run run in tx, a batch of the
// prune that removed before records in its earlier batches. The first
// batch finds the id's prune record in the trail, or the id claimed by
// another run: invalid, as a used id. A later batch that finds either has
// lost the claim its first batch took (deleted by hand): unavailable
// (stoppedAfter says how many records the earlier batches removed).
// Either way the batch rolls back, having removed nothing.
func (b *Backend) claimPruneID(ctx context.Context, tx *sql.Tx, r audit.PruneRequest, run string, now time.Time, before int64) error {
	holder := ""
	_, err := scanRecorded(tx.StmtContext(ctx, b.stmts.findRequest).QueryRowContext(ctx, "", r.RequestID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, qPruneClaim, r.RequestID, run, r.Actor, micros(r.Before), micros(now)); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, qPruneHolder, r.RequestID).Scan(&holder); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	switch {
	case holder == run:
		return nil
	case before == 0:
		return backendkit.PruneIDUsed(r.RequestID)
	default:
		return backendkit.NewError(audit.OpPrune, protocol.StatusUnavailable, nil,
			"sqlite database %q: the claim of this prune's request id %q (leasestore_audit_prune_claim) was deleted or "+
				"taken outside this prune: prune again with another request id", b.file, r.RequestID)
	}
}

// Who frees the claim of a prune whose write failed (PruneAudit): the
// caller, once the write's after has judged the outcome, or after, in the
// write's batch, when the caller left it there (its context ended while
// the batch ran the write).
const (
	callerFrees int32 = iota + 1
	afterFrees
)

// claimDropTimeout bounds a prune's freeing of its claim when it stops
// early; claimDropGrace bounds how long the prune waits for it past its
// own context's end before it answers, the freeing going on in the
// background (the backend's drops, which Close waits for).
const (
	claimDropTimeout = 5 * time.Second
	claimDropGrace   = 250 * time.Millisecond
)

// dropPruneClaim frees the claim the run holds on r's request id, in a
// write of its own, so that a prune that stopped early can be sent again
// with its id. It waits for the file's write lock, as a batch does; it
// waits for that until ctx ends and claimDropGrace more, then lets the
// freeing go on in the background (see the backend's drops, which Close waits
// for), so that a prune cut off by its deadline answers at once. When the
// freeing fails too (the Backend closed first, the lock held past
// claimDropTimeout) the claim stays, and the id is refused as used.
func (b *Backend) dropPruneClaim(ctx context.Context, r audit.PruneRequest, run string) {
	b.drops.GoAwait(ctx, claimDropGrace, func() { b.unclaimPrune(context.WithoutCancel(ctx), r, run) })
}

// unclaimPrune is the freeing of dropPruneClaim, under ctx and
// claimDropTimeout.
func (b *Backend) unclaimPrune(ctx context.Context, r audit.PruneRequest, run string) {
	dctx, cancel := context.WithTimeout(ctx, claimDropTimeout)
	defer cancel()
	_, _ = b.write(dctx, audit.OpPrune, func(ctx context.Context, tx *sql.Tx, _ time.Time) (protocol.Result, bool, error) {
		_, err := tx.ExecContext(ctx, qPruneUnclaim, r.RequestID, run)
		return protocol.Result{}, err == nil, err
	})
}

// stoppedAfter is err, the failure that stopped the prune r, saying how
// many records (removed) the prune's earlier batches removed for good,
// each batch committed on its own with its prune record (pruneRecord);
// err as it is when they removed none. A prune of many batches cannot be
// all or nothing, so it says how far it got, as the result's Removed
// does.
func (b *Backend) stoppedAfter(err error, r audit.PruneRequest, removed int64) error {
	if removed == 0 || err == nil {
		return err
	}
	where := fmt.Sprintf("sqlite database %q", b.file)
	done := fmt.Sprintf("%s: the prune removed %d records before %s in batches that committed, each "+
		"recorded by its batch's prune record, and then stopped (send it again to remove the rest)", where, removed, r.Before.UTC().Format(time.RFC3339Nano))
	pe, ok := err.(*protocol.Error)
	if !ok {
		return backendkit.NewError(audit.OpPrune, protocol.StatusOf(err), err, "%s", done)
	}
	c := *pe
	c.Message = done
	if m := strings.TrimPrefix(pe.Message, where+": "); m != "" {
		c.Message += ": " + m
	}
	return &c
}

// pruneTaking is what a prune batch takes (qPruneTaken): how many
// records, and the greatest id of them in each namespace and ("") in all.
type pruneTaking struct {
	n   int64
	top map[string]int64
}

// pruneTaken reads, in tx, what the next batch of a prune of the records
// before before takes after the id after, at now (the records live leases
// need stay).
func pruneTaken(ctx context.Context, tx *sql.Tx, before, now time.Time, after int64) (pruneTaking, error) {
	t := pruneTaking{top: map[string]int64{}}
	rows, err := tx.QueryContext(ctx, qPruneTaken, micros(before), pruneBatch, micros(now), after)
	if err != nil {
		return t, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ns     string
			n, top int64
		)
		if err := rows.Scan(&ns, &n, &top); err != nil {
			return t, err
		}
		t.n += n
		t.top[ns] = top
		t.top[""] = max(t.top[""], top)
	}
	return t, rows.Err()
}

// marked reports whether the mark of what prunes removed
// (qPrunedThrough), read in tx once the batch deleted what it took,
// covers the greatest id it took in each namespace and in all.
func (t pruneTaking) marked(ctx context.Context, tx *sql.Tx) (bool, error) {
	for ns, top := range t.top {
		var through int64
		if err := tx.QueryRowContext(ctx, qPrunedThrough, ns).Scan(&through); err != nil {
			return false, err
		}
		if through < top {
			return false, nil
		}
	}
	return true, nil
}

// keptError is refusal, the refusal of a prune batch that a trigger of
// the operator's kept from removing or marking what it took, made of what
// (the triggers on the trail, read in tx, that fire on DELETE and that the
// store's migrations did not make: trailDeleteTriggers) and fix (the DROP
// TRIGGER of each); the error of reading them when that fails. The batch
// rolls back whole.
func keptError(ctx context.Context, tx *sql.Tx, refusal func(what, fix string) *protocol.Error) error {
	triggers, err := trailDeleteTriggers(ctx, tx)
	if err != nil {
		return err
	}
	if len(triggers) == 0 {
		return refusal("a trigger on leasestore_audit that is not the store's own", "DROP TRIGGER name (with the sqlite3 shell)")
	}
	what := "the trigger "
	if len(triggers) > 1 {
		what = "the triggers "
	}
	var fix []string
	for _, t := range triggers {
		fix = append(fix, "DROP TRIGGER "+quoteIdent(t))
	}
	return refusal(what+strings.Join(triggers, ", ")+" on leasestore_audit (not the store's own)",
		strings.Join(fix, "; ")+" (with the sqlite3 shell)")
}

// trailDeleteTriggers reads, in tx (qTrailTriggers), the names of the
// triggers on the trail that fire on DELETE and that the store's
// migrations did not make (see [migrations.SQLiteTriggers]): what can
// keep a prune's records (RAISE(IGNORE) before the DELETE), its mark
// (RAISE(IGNORE) after it, skipping the store's trigger) or refuse it
// (RAISE(ABORT)). One whose text triggerHead cannot read is counted in.
func trailDeleteTriggers(ctx context.Context, tx *sql.Tx) ([]string, error) {
	own, err := migrations.SQLiteTriggers()
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, qTrailTriggers)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, text string
		if err := rows.Scan(&name, &text); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(own, func(t migrations.Trigger) bool { return strings.EqualFold(t.Name, name) }) {
			continue
		}
		if m := triggerHead.FindStringSubmatch(text); m == nil || strings.EqualFold(m[1], "DELETE") {
			out = append(out, name)
		}
	}
	return out, rows.Err()
}

// triggerHead reads the event of a trigger (group 1) from its CREATE
// TRIGGER statement, as sqlite_schema keeps it: the name (quoted, or bare
// and followed by a space), then BEFORE, AFTER or INSTEAD OF, if any.
var triggerHead = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:TEMP(?:ORARY)?\s+)?TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?` +
	`(?:(?:` + sqlIdent + `)\s*\.\s*)?(?:(?:` + sqlQuoted + `)\s*|(?:` + sqlBare + `)\s+)(?:(?:BEFORE|AFTER|INSTEAD\s+OF)\s+)?` +
	`(DELETE|INSERT|UPDATE)\b`)

// sqlQuoted, sqlBare and sqlIdent match an SQL identifier: quoted (as
// SQLite accepts it), bare, either.
const (
	sqlQuoted = `"(?:[^"]|"")*"|` + "`(?:[^`]|``)*`" + `|\[[^\]]*\]|'(?:[^']|'')*'`
	sqlBare   = `[^\s."'` + "`" + `\[]+`
	sqlIdent  = sqlQuoted + `|` + sqlBare
)

// quoteIdent is name as SQL: as it is when it is a plain word, else in
// double quotes.
func quoteIdent(name string) string {
	if plainIdent.MatchString(name) {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// plainIdent matches a name that needs no quotes.
var plainIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
