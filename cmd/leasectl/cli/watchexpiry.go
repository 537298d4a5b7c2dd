package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// OpExpire is the op of the event watch prints when a watched lease ran
// out un-renewed. It is no audit record: expiry changes nothing in the
// store. Its status is expired, its at the lease's expires_at (the
// store's clock), and its id that of the record (acquire or renew) that
// set that expiry.
const OpExpire protocol.Op = "expire"

// watchOps are the ops --op accepts.
var watchOps = []protocol.Op{protocol.OpAcquire, protocol.OpRenew, protocol.OpRelease, protocol.OpRevoke, OpExpire}

// parseWatchOps reads --op values (each may be a comma-separated list) and
// --no-renewals into the set of ops to print; nil prints every op. --op
// naming renew with --no-renewals asks for renewals and for none: the
// flags conflict (with --op renew alone, a watch that never prints).
func parseWatchOps(values []string, noRenewals bool) (map[protocol.Op]bool, error) {
	var show map[protocol.Op]bool
	for _, v := range values {
		for _, o := range strings.Split(v, ",") {
			op := protocol.Op(strings.TrimSpace(o))
			if !slices.Contains(watchOps, op) {
				return nil, usageError("--op: %q is not one of acquire, renew, release, revoke, expire", o)
			}
			if show == nil {
				show = map[protocol.Op]bool{}
			}
			show[op] = true
		}
	}
	if noRenewals && show[protocol.OpRenew] {
		return nil, usageError("--op renew and --no-renewals go apart: --no-renewals leaves out the renewals --op asks for; drop one")
	}
	if noRenewals {
		if show == nil {
			show = map[protocol.Op]bool{}
			for _, op := range watchOps {
				show[op] = true
			}
		}
		delete(show, protocol.OpRenew)
	}
	return show, nil
}

// expiryWatch keeps the leases a watch has seen taken or renewed (or
// found live when it started) and tells which ran out un-renewed: when
// one's expires_at passes by the local clock, a get asks the store (whose
// clock judges expiry) whether it still holds. A lease the store no longer
// holds ran out only when the trail holds no change of its key that the
// watch has yet to read: a release or revoke the follower has not reached
// (it is catching up on older records, or a transaction in progress holds
// newer ones back) ended it, and an acquire with a greater token ends the
// previous lease itself. It is used by one goroutine.
type expiryWatch struct {
	leases  map[protocol.Key]audit.Record // the record that set each lease's expiry
	check   map[protocol.Key]time.Time    // when to ask the store again, after it still held the lease
	pending map[protocol.Key]int64        // the id of a record of the key still to be read: no judging before it
	ended   map[protocol.Key]int64        // the token of the key's last lease whose expiry was reported
	last    int64                         // the id of the last record read, or past it how far the watch has read
	// positioned is set once the watch told how far it has read (passed):
	// a store read page by page tells after each read, a served store's
	// follow stream in its position events and etcd's stream from its
	// revisions (audit.PositionFollower); never a server older than
	// position events.
	positioned bool
}

func newExpiryWatch() *expiryWatch {
	return &expiryWatch{leases: map[protocol.Key]audit.Record{}, check: map[protocol.Key]time.Time{},
		pending: map[protocol.Key]int64{}, ended: map[protocol.Key]int64{}}
}

// after sets where the watch reads from: after the record of cursor (an
// oldest-first audit cursor; "" is the start of the trail).
func (w *expiryWatch) after(cursor string) {
	if id, err := audit.DecodeCursor(cursor); err == nil {
		w.last = id
	}
}

// passed moves where the watch has read to past cursor, the cursor it
// reads on from after a read (audit.WatchConfig.Passed): every record of
// the watched keys up to it was read, so a prune up to it leaves the
// trail readable from there.
func (w *expiryWatch) passed(cursor string) {
	if id, err := audit.DecodeCursor(cursor); err == nil {
		w.last = max(w.last, id)
		w.positioned = true
	}
}

// waiting tells whether the trail holds a change of k that the watch has
// not read yet.
func (w *expiryWatch) waiting(k protocol.Key) bool { return w.pending[k] > w.last }

// checkAt is when to ask the store about the lease at k.
func (w *expiryWatch) checkAt(k protocol.Key) time.Time {
	if at, ok := w.check[k]; ok {
		return at
	}
	return w.leases[k].ExpiresAt
}

// seed tracks a lease live when the watch starts, as a record with ID 0
// (the lease's own record is read only if it runs out: withRecord). A
// record the watch reads later replaces it, as that of a lease taken
// since: one of an older token too (watch --since reads a key's earlier
// leases before the live one's acquire).
func (w *expiryWatch) seed(l protocol.Lease) {
	w.leases[l.Key] = audit.Record{At: l.RenewedAt, Op: protocol.OpRenew, Namespace: l.Key.Namespace, Key: l.Key.Name,
		Owner: l.Owner, Token: l.Token, Status: protocol.StatusRenewed, Version: audit.RecordFormatVersion, ExpiresAt: l.ExpiresAt}
}

// record learns from rec and returns the expiry events it implies (an
// acquire with a greater token over a lease that ran out).
func (w *expiryWatch) record(rec audit.Record) []audit.Record {
	w.last = max(w.last, rec.ID)
	k := protocol.Key{Namespace: rec.Namespace, Name: rec.Key}
	if !w.waiting(k) {
		delete(w.pending, k)
	}
	var out []audit.Record
	switch rec.Op {
	case protocol.OpAcquire, protocol.OpRenew:
		if rec.Token <= w.ended[k] {
			return nil // a lease whose expiry was reported: it does not come back
		}
		if prev, ok := w.leases[k]; ok && prev.Token < rec.Token {
			out = append(out, w.expired(k, prev))
		}
		delete(w.check, k)
		if !rec.ExpiresAt.IsZero() {
			w.leases[k] = rec
		}
	case protocol.OpRelease, protocol.OpRevoke:
		if prev, ok := w.leases[k]; ok && prev.Token <= rec.Token {
			delete(w.leases, k)
			delete(w.check, k)
		}
	}
	return out
}

// expired stops tracking the lease at k whose last acquire or renew is r
// and returns its expiry event.
func (w *expiryWatch) expired(k protocol.Key, r audit.Record) audit.Record {
	delete(w.leases, k)
	delete(w.check, k)
	w.ended[k] = r.Token
	return expiryEvent(r)
}

// next returns when the earliest tracked lease runs out by the local
// clock; ok is false when none is tracked (or every one waits for a
// record of its key).
func (w *expiryWatch) next() (at time.Time, ok bool) {
	for k := range w.leases {
		if w.waiting(k) {
			continue
		}
		if c := w.checkAt(k); !ok || c.Before(at) {
			at, ok = c, true
		}
	}
	return at, ok
}

// due asks the store about every lease past its expiry by the local clock
// and returns the expiry events of those the store no longer holds and
// whose key has no change in the trail after the last record read (read
// from r, as committed: a follower's read could be held back). A lease the
// store still holds (renewed, or its clock is behind) stays tracked, and
// is asked about again after recheck; one whose key has a change still to
// be read waits for it. When a prune removed records after the last one
// read and the watch never told how far it has read (a streamed trail that
// tells no position: a server older than position events, or a stream
// that has told none yet), the key's newest record tells instead: a stream
// delivers each record as it commits, so a change of the key that a prune
// (of records older than its --before) removed was delivered first.
func (w *expiryWatch) due(ctx context.Context, rt *protocol.Runtime, r audit.Reader, now time.Time, recheck time.Duration) []audit.Record {
	var out []audit.Record
	for k, l := range w.leases {
		if w.waiting(k) || w.checkAt(k).After(now) {
			continue
		}
		res, err := rt.Get(ctx, protocol.GetRequest{Key: k})
		switch {
		case err == nil && res.Lease != nil && res.Lease.Token == l.Token:
			if res.Lease.ExpiresAt.After(l.ExpiresAt) { // renewed; its record is on its way
				l.ExpiresAt = res.Lease.ExpiresAt
				w.leases[k] = l
			}
			w.check[k] = latest(l.ExpiresAt, now.Add(recheck))
		case err == nil || errors.Is(err, protocol.ErrNotFound):
			// Gone. Asked after the get, the trail holds any release,
			// revoke or acquire that ended the lease.
			page, err := r.ReadAudit(ctx, audit.Query{Namespace: k.Namespace, Key: k.Name, Cursor: audit.EncodeCursor(w.last), Limit: 1})
			if errors.Is(err, audit.ErrPruned) && !w.positioned {
				page, err = r.ReadAudit(ctx, audit.Query{Namespace: k.Namespace, Key: k.Name, Limit: 1, Newest: true})
				if err == nil && len(page.Records) == 1 && page.Records[0].ID <= w.last {
					page.Records = nil // read already
				}
			}
			switch {
			case err != nil:
				w.check[k] = now.Add(recheck)
			case len(page.Records) > 0:
				w.pending[k] = page.Records[0].ID
			default:
				out = append(out, w.expired(k, w.withRecord(ctx, r, l)))
			}
		default: // the store did not answer: ask again later
			w.check[k] = now.Add(recheck)
		}
	}
	slices.SortFunc(out, func(a, b audit.Record) int { return a.At.Compare(b.At) })
	return out
}

// withRecord returns l, the lease at its key as tracked, as the record of
// the acquire or renew that set its expiry, read from r when l was seeded
// from the store's lease (its ID 0): the newest such record of the key,
// when it is l's (token and expiry), so that the expiry event carries its
// id. One read, for a lease that ran out only; l as it is when the record
// is gone (pruned) or the read fails.
func (w *expiryWatch) withRecord(ctx context.Context, r audit.Reader, l audit.Record) audit.Record {
	if l.ID != 0 {
		return l
	}
	page, err := r.ReadAudit(ctx, audit.Query{Namespace: l.Namespace, Key: l.Key,
		Ops: []protocol.Op{protocol.OpAcquire, protocol.OpRenew}, Limit: 1, Newest: true})
	if err != nil || len(page.Records) != 1 || page.Records[0].Token != l.Token || !page.Records[0].ExpiresAt.Equal(l.ExpiresAt) {
		return l
	}
	return page.Records[0]
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// expiryEvent is the expiry of the lease whose last acquire or renew is r.
func expiryEvent(r audit.Record) audit.Record {
	return audit.Record{ID: r.ID, At: r.ExpiresAt, Op: OpExpire, Namespace: r.Namespace, Key: r.Key, Owner: r.Owner,
		Token: r.Token, Actor: r.Owner, Status: protocol.StatusExpired, Version: r.Version,
		Reason: fmt.Sprintf("not renewed; expired at %s by the store's clock", r.ExpiresAt.UTC().Format(time.RFC3339Nano))}
}
