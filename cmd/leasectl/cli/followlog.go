package cli

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// followItem is one item of a follow, as feed hands it on: a record, a
// failure, or (passed, from audit.WatchConfig.Passed) how far the follow
// has read.
type followItem struct {
	rec    audit.Record
	err    error
	passed string
}

// feed sends seq's records and failures on items until seq ends or ctx
// ends, then closes items. Whatever else sends on items (a Passed
// callback) must run in seq's goroutine.
func feed(ctx context.Context, items chan<- followItem, seq iter.Seq2[audit.Record, error]) {
	defer close(items)
	for rec, err := range seq {
		select {
		case items <- followItem{rec: rec, err: err}:
		case <-ctx.Done():
			return
		}
	}
}

// retryNotice is how long a failure a follow yielded is held, while the
// follow neither yields again nor ends, before it is logged as retried: a
// follower ends at once after a failure it ends on, and pauses before it
// retries.
const retryNotice = time.Second

// failureLog logs the failures a follow (audit --follow, watch) yields
// that it goes on after, as "read failed; retrying", and never one it
// ends on (a refused token, a cursor behind a prune, an event the client
// cannot read, an etcd revision compacted, a closed store): that one is
// final, and the command fails with it (failWith). Only the follower
// knows which a failure is, and tells it by what follows: so a failure is
// held until the follow yields again (it went on: logged), ends (final:
// not logged), or went on for retryNotice without either (logged then).
// A record the follower reports as altered outside leasestore (etcd's
// ErrTampered) is no failed read: it is logged at once, as an error the
// follow goes on after.
type failureLog struct {
	a       *app
	what    string // the command, heading each line
	pending error
	timer   *time.Timer
}

func (a *app) newFailureLog(what string) *failureLog {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &failureLog{a: a, what: what, timer: t}
}

// failed holds err, a failure the follow yielded; the follow went on
// after the one held before, which is logged.
func (l *failureLog) failed(err error) {
	l.wentOn()
	if errors.Is(err, etcd.ErrTampered) {
		l.a.log.Error(l.what+": the audit trail was altered outside leasestore; following on", "err", l.a.red.redact(err.Error()))
		return
	}
	l.pending = err
	l.timer.Reset(retryNotice)
}

// wentOn logs the failure held, if any: the follow went on after it.
func (l *failureLog) wentOn() {
	if l.pending == nil {
		return
	}
	l.timer.Stop()
	l.a.log.Warn(l.what+": read failed; retrying", "err", l.a.red.redact(l.pending.Error()))
	l.pending = nil
}

// due fires when the failure held has waited retryNotice: call wentOn.
func (l *failureLog) due() <-chan time.Time { return l.timer.C }

// stop lets go of the timer.
func (l *failureLog) stop() { l.timer.Stop() }
