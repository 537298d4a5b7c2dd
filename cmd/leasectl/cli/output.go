package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// The JSON shapes of leasectl's output (DESIGN.md), shared with the HTTP
// API: see package wire.
type (
	leaseJSON  = wire.Lease
	resultJSON = wire.Result
	listJSON   = wire.ListPage
	recordJSON = wire.Record
	auditJSON  = wire.AuditPage
	errorJSON  = wire.Error
)

// timeJSON formats a backend time for JSON (see wire.Time).
func timeJSON(t time.Time) string { return wire.Time(t) }

// timeTable formats a backend time for tables: UTC with a fixed six
// fraction digits (backends keep microseconds), so columns line up; "-"
// for an unknown (zero) time.
func timeTable(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func toLeaseJSON(l protocol.Lease) leaseJSON { return wire.FromLease(l) }

func toRecordJSON(r audit.Record) recordJSON { return wire.FromRecord(r) }

func toResultJSON(res protocol.Result, msg string) resultJSON { return wire.FromResult(res, msg) }

// printJSON writes v as one line of JSON on stdout, in one Write.
func (a *app) printJSON(v any) { _ = a.writeJSON(v) }

// writeJSON is printJSON, returning the write's error: a command that
// counts what reached stdout (audit export) stops at the first line that
// did not.
func (a *app) writeJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unsupported types fail; every output type here is plain data.
		panic(fmt.Sprintf("leasectl: encode output: %v", err))
	}
	_, err := a.stdout.Write(buf.Bytes())
	return err
}

// printText writes s on stdout in one Write.
func (a *app) printText(s string) { _, _ = a.stdout.Write([]byte(s)) }

// printOutcome prints a lease operation's outcome: its result
// (printResult), or, when err is a served store's refusal of the bearer
// token (HTTP 401/403) or a store's of the DSN's credentials or their
// grants, that refusal, which exits 7.
func (a *app) printOutcome(res protocol.Result, err error) error {
	return a.printOutcomeRevokedAt(res, err, time.Time{})
}

// readCutOff returns the error of a read (get, list, describe) that
// Ctrl-C (ctx, the command's context, cancelled) cut off before the store
// answered, unprinted, so that Execute reports it as it reports every
// command interrupted so (audit, health): status interrupted, exit 130.
// A change cut off prints its timeout result instead (printOutcome), the
// request id to retry with to learn the outcome; a read has no outcome to
// learn. nil when err is nil, the store answered (status), or ctx is live.
func readCutOff(ctx context.Context, status protocol.Status, err error) error {
	if err == nil || answered(status) || ctx.Err() == nil {
		return nil
	}
	return failWith(err)
}

// printOutcomeRevokedAt is printOutcome for a revoke whose time by the
// store's clock (its audit record's) is revokedAt, zero when not known:
// see formatResult.
func (a *app) printOutcomeRevokedAt(res protocol.Result, err error, revokedAt time.Time) error {
	if refused := authFailure(err); refused != nil {
		return refused
	}
	return a.printResult(res, revokedAt)
}

// printResult prints a lease operation's result (revokedAt as formatResult
// takes it) and returns the error that makes Execute exit with the
// status's code. With -o token only a success prints (the token and a
// newline) on stdout; anything else goes to stderr, so a script never
// reads another owner's token.
func (a *app) printResult(res protocol.Result, revokedAt time.Time) error {
	msg := a.red.redact(res.Message)
	switch {
	case a.output == "json":
		a.printJSON(toResultJSON(res, msg))
	case !answered(res.Status):
		// Not the store's answer: a diagnostic, on stderr like the others.
		_, _ = io.WriteString(a.stderr, "leasectl: "+formatResult(res, msg, time.Now(), time.Time{}))
	case a.output == "token" && res.Status.Success() && res.Lease != nil:
		if res.Replayed {
			fmt.Fprintf(a.stderr, "leasectl: replayed: the recorded outcome of an earlier request with this id; "+
				"renew the lease before acting on token %d\n", res.Lease.Token)
		}
		a.printText(fmt.Sprintf("%d\n", res.Lease.Token))
	case a.output == "token":
		_, _ = io.WriteString(a.stderr, "leasectl: "+formatResult(res, msg, time.Now(), time.Time{}))
	default:
		a.printText(formatResult(res, msg, time.Now(), revokedAt))
	}
	if res.Status.Success() {
		return nil
	}
	return reported{status: string(res.Status)}
}

// explainNotOwner rewrites a not_owner result's message to say what the
// store holds beside what was asked: the holder, or that the token was
// never issued, and whether that lease is live or expired at now (this
// machine's clock, as the table's expiry is). owner is "" for revoke,
// which asks as nobody.
func explainNotOwner(res protocol.Result, owner string, token int64, now time.Time) protocol.Result {
	l := res.Lease
	switch {
	case res.Status != protocol.StatusNotOwner:
	case l == nil && owner == "":
		res.Message = fmt.Sprintf("%s (asked with token %d)", res.Message, token)
	case l == nil:
		res.Message = fmt.Sprintf("%s (asked as %s with token %d)", res.Message, lineValue(owner), token)
	case token > l.Token && !l.LiveAt(now):
		res.Message = fmt.Sprintf("token %d was never issued: the key's last lease, %s's with token %d, expired at %s",
			token, lineValue(l.Owner), l.Token, wire.Time(l.ExpiresAt))
	case token > l.Token:
		res.Message = fmt.Sprintf("token %d was never issued: the live lease has token %d, held by %s",
			token, l.Token, lineValue(l.Owner))
	case !l.LiveAt(now):
		res.Message = fmt.Sprintf("token %d was %s's, not %s's, and that lease expired at %s",
			l.Token, lineValue(l.Owner), lineValue(owner), wire.Time(l.ExpiresAt))
	default:
		res.Message = fmt.Sprintf("token %d is held by %s, not by %s", l.Token, lineValue(l.Owner), lineValue(owner))
	}
	return res
}

// answered reports whether status is the store's answer (a success or a
// refusal), printed on stdout in table mode, rather than the lack of one
// (timeout, unavailable, closed, invalid, interrupted), printed on stderr.
func answered(status protocol.Status) bool {
	switch status {
	case protocol.StatusTimeout, protocol.StatusUnavailable, protocol.StatusClosed, protocol.StatusInvalid, StatusInterrupted:
		return false
	}
	return true
}

// formatResult renders a result for people: the status and message (the
// status once, when the message starts with it), then the lease, one field
// a line (an owner holding a blank quoted, lineValue), and the request id
// of a change.
// A revoke's result carries the former expiry, not the revoke's time:
// revokedAt is that time by the store's clock (its audit record's), from
// which a lock-delay runs, zero when not known.
func formatResult(res protocol.Result, msg string, now, revokedAt time.Time) string {
	var b strings.Builder
	head := string(res.Status)
	key := res.Key
	if key == (protocol.Key{}) && res.Lease != nil {
		key = res.Lease.Key
	}
	if key != (protocol.Key{}) {
		head += " " + key.String()
	}
	if msg == "" || msg == string(res.Status) {
		fmt.Fprintf(&b, "%s\n", head)
	} else {
		fmt.Fprintf(&b, "%s: %s\n", head, msg)
	}
	if res.Replayed {
		b.WriteString("(replayed: the recorded outcome of an earlier request with this id; nothing changed now)\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	// A get that answers not_found with a lease, and an acquire's conflict
	// that the store says a lock-delay caused (also when a wait for it was
	// interrupted), show the ended lease whose lock-delay keeps the key:
	// the store's clock judges expiry, not this one.
	ended := res.Status == protocol.StatusNotFound || keptByLockDelay(res)
	if l := res.Lease; l != nil {
		fmt.Fprintf(tw, "  key\t%s\n", l.Key)
		fmt.Fprintf(tw, "  owner\t%s\n", lineValue(l.Owner))
		fmt.Fprintf(tw, "  token\t%d\n", l.Token)
		fmt.Fprintf(tw, "  acquired\t%s\n", timeTable(l.AcquiredAt))
		fmt.Fprintf(tw, "  renewed\t%s\n", timeTable(l.RenewedAt))
		switch {
		case l.ExpiresAt.IsZero():
			fmt.Fprintf(tw, "  expires\t-\n")
		case res.Status == protocol.StatusReleased || res.Status == protocol.StatusRevoked:
			fmt.Fprintf(tw, "  expires\t%s (no longer: %s)\n", timeTable(l.ExpiresAt), res.Status)
		case ended:
			fmt.Fprintf(tw, "  expires\t%s (ended %s ago)\n", timeTable(l.ExpiresAt), writeRounded(max(now.Sub(l.ExpiresAt), 0)))
		default:
			fmt.Fprintf(tw, "  expires\t%s (%s)\n", timeTable(l.ExpiresAt), timeLeft(l.ExpiresAt, now))
		}
		switch {
		case l.LockDelay > 0 && res.Status == protocol.StatusRevoked && revokedAt.IsZero():
			// The revoke's time was not read (its record is gone, or the
			// read failed): this clock's now would be wrong by the clocks'
			// skew, and for a replay by the time since the revoke.
			fmt.Fprintf(tw, "  lock-delay\t%s (acquires answer conflict for the delay from the revoke's time, which its audit record holds)\n",
				durations.Format(l.LockDelay))
		case l.LockDelay > 0 && res.Status == protocol.StatusRevoked:
			// The delay runs from the revoke, not from the former expiry
			// shown above.
			free := revokedAt.Add(l.LockDelay)
			fmt.Fprintf(tw, "  lock-delay\t%s (acquires answer conflict until %s by the store's clock: the revoke's time %s plus the delay; %s)\n",
				durations.Format(l.LockDelay), timeTable(free), timeTable(revokedAt), delayLeft(free, now))
		case l.LockDelay > 0 && res.Status == protocol.StatusReleased:
			fmt.Fprintf(tw, "  lock-delay\t%s (not applied: a release by the holder frees the key at once)\n", durations.Format(l.LockDelay))
		case l.LockDelay > 0 && ended:
			fmt.Fprintf(tw, "  lock-delay\t%s (acquires answer conflict until %s, %s)\n",
				durations.Format(l.LockDelay), timeTable(l.FreeAt()), timeLeft(l.FreeAt(), now))
		case l.LockDelay > 0:
			fmt.Fprintf(tw, "  lock-delay\t%s (acquires wait until %s if it is revoked or runs out)\n",
				durations.Format(l.LockDelay), timeTable(l.FreeAt()))
		}
	}
	if res.RequestID != "" && res.Op != protocol.OpGet && res.Op != protocol.OpList {
		fmt.Fprintf(tw, "  request id\t%s\n", res.RequestID)
	}
	_ = tw.Flush()
	return b.String()
}

// delayLeft describes how long until a lock-delay ends at free by the
// local clock.
func delayLeft(free, now time.Time) string {
	if d := free.Sub(now); d > 0 {
		return "in " + writeRounded(d)
	}
	return "ended " + writeRounded(now.Sub(free)) + " ago"
}

// timeLeft describes how long until expires by the local clock (the backend
// judges expiry by its own clock; this is for people).
func timeLeft(expires, now time.Time) string {
	d := expires.Sub(now)
	switch {
	case d <= 0:
		return "expired " + writeRounded(-d) + " ago"
	default:
		return "in " + writeRounded(d)
	}
}

// writeRounded writes d rounded (roundDuration) in the one duration
// grammar, as users write it: 30m, 1h30m, 2.5s (not Go's 30m0s).
func writeRounded(d time.Duration) string { return durations.Format(roundDuration(d)) }

// roundDuration rounds to 0.1s under a minute and to seconds above.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// formatLeases renders a page of leases as a table, with a header line
// unless noHeaders. HELD FOR is the time since the lease was acquired. An
// owner holding a blank is quoted as record lines quote it (lineValue).
func formatLeases(leases []protocol.Lease, now time.Time, noHeaders bool) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, "NAMESPACE\tKEY\tOWNER\tTOKEN\tHELD FOR\tTIME LEFT\tEXPIRES AT")
	}
	for _, l := range leases {
		left := "expired"
		if d := l.ExpiresAt.Sub(now); d > 0 {
			left = writeRounded(d)
		}
		held := "-"
		if !l.AcquiredAt.IsZero() {
			held = writeRounded(max(now.Sub(l.AcquiredAt), 0))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.Key.Namespace, l.Key.Name, lineValue(l.Owner), l.Token, held, left, timeTable(l.ExpiresAt))
	}
	_ = tw.Flush()
	return b.String()
}

// formatRecords renders audit records as a table, with a header line
// unless noHeaders; an owner or actor holding a blank is quoted
// (lineValue), as list quotes an owner.
func formatRecords(recs []audit.Record, noHeaders bool) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, "ID\tAT\tOP\tNAMESPACE\tKEY\tOWNER\tTOKEN\tACTOR\tSTATUS\tREASON")
	}
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, timeTable(r.At), r.Op, r.Namespace, r.Key,
			lineValue(r.Owner), r.Token, lineValue(r.Actor), r.Status, r.Reason)
	}
	_ = tw.Flush()
	return b.String()
}

// formatRecordLine renders one audit record on one line, for watch and
// audit --follow: fields separated by blanks, the key, the owner and the
// actor quoted when they hold a blank (lineValue), the reason always, so
// that the line reads back into the same fields.
func formatRecordLine(r audit.Record) string {
	line := fmt.Sprintf("%d %s %-7s %s owner=%s token=%d actor=%s status=%s", r.ID, timeTable(r.At), r.Op,
		lineValue(protocol.Key{Namespace: r.Namespace, Name: r.Key}.String()), lineValue(r.Owner), r.Token,
		lineValue(r.Actor), r.Status)
	if r.Reason != "" {
		line += fmt.Sprintf(" reason=%q", r.Reason)
	}
	return line + "\n"
}

// lineValue returns s as a field of a record line (and as the owner in
// list's table, a result's owner row, and the owner and actor columns of
// audit's table): [textfield.Shown], which the runtime's "held by OWNER"
// message uses too.
func lineValue(s string) string { return textfield.Shown(s) }

// nextPageCommand returns the command line that reads the page after this
// one: the command with every flag the user set (the namespace, filters,
// limit and store included) and --cursor, ready to paste. A --dsn holding
// a password is left out (masked, it would fail to authenticate), and a
// comment after the command says to add it back; a DSN from the
// environment is never repeated.
func nextPageCommand(cmd *cobra.Command, cursor string) string {
	parts := []string{cmd.CommandPath()}
	note := ""
	add := func(f *pflag.Flag) {
		if !f.Changed || f.Name == "cursor" {
			return
		}
		v := f.Value.String()
		if f.Name == "dsn" && len(secretsOf(v)) > 0 {
			note = "  # add your --dsn: not repeated here, it holds a password"
			return
		}
		parts = append(parts, "--"+f.Name+"="+shellQuote(v))
	}
	cmd.InheritedFlags().VisitAll(add)
	cmd.LocalFlags().VisitAll(add)
	return strings.Join(append(parts, "--cursor="+cursor), " ") + note
}

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string { return textfield.ShellQuote(s) }

// failureJSON is the one JSON object a command prints when it fails before
// or instead of its answer: the shape of the command's own answer (a
// result for the lease commands and run, which answers as acquire does
// until CMD starts; a result with its records for describe; a page for
// list and audit) with the status and message, or {"status","message"}
// for the other commands. reqID is the request id the user gave
// (--request-id), "" for none: a result carries it.
func failureJSON(command, status, msg, reqID string) any {
	switch command {
	case "acquire", "renew", "release", "get", "revoke", "run":
		return resultJSON{Status: status, RequestID: reqID, Message: msg}
	case "describe":
		return describeJSON{resultJSON: resultJSON{Status: status, Message: msg}, Records: []recordJSON{}}
	case "list":
		return listJSON{Status: status, Leases: []leaseJSON{}, Message: msg}
	case "audit":
		return auditJSON{Status: status, Records: []recordJSON{}, Message: msg}
	}
	return errorJSON{Status: status, Message: msg}
}

// printEmpty prints the notice of a table with no row: on stdout, or on
// stderr when the table has no headers (stdout then holds only data lines,
// so that a script counting them counts none).
func (a *app) printEmpty(notice string, noHeaders bool) {
	if noHeaders {
		_, _ = io.WriteString(a.stderr, notice)
		return
	}
	a.printText(notice)
}

// morePages tells how to read the page after this one when cursor is not
// empty: on stdout after the table, or on stderr when the table has no
// headers (its lines are data for scripts).
func (a *app) morePages(cmd *cobra.Command, cursor string, noHeaders bool) {
	if cursor == "" {
		return
	}
	line := "more: " + nextPageCommand(cmd, cursor) + "\n"
	if noHeaders {
		_, _ = io.WriteString(a.stderr, line)
		return
	}
	a.printText(line)
}
