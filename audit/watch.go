package audit

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// DefaultWatchInterval is how often [Watch] reads the trail while it is
// caught up.
const DefaultWatchInterval = 200 * time.Millisecond

// WatchConfig tunes [Watch]. A nil *WatchConfig means all defaults.
type WatchConfig struct {
	// Interval is the pause between reads once the watcher has read every
	// committed record. Default: [DefaultWatchInterval].
	Interval time.Duration
	// ReadTimeout bounds each read. Default: 5s.
	ReadTimeout time.Duration
	// HeldBack, when set, is called after each read that found nothing new
	// but was held back (see [Page].HeldBack), with how long the watch
	// has been held back: on PostgreSQL a transaction in progress anywhere
	// in the cluster keeps newer records from a follower until it ends.
	HeldBack func(d time.Duration)
	// Passed, when set, is called after each read that succeeded, with the
	// cursor the watch reads on from: past the records the read went over,
	// also those q does not select (see [Page].FollowCursor). It is called
	// in the goroutine ranging over the stream, after the read's records
	// were yielded. When r is a [Follower], it is called only when r is a
	// [PositionFollower] (httpapi.Client, the etcd backend), with the
	// positions its stream tells; never for one that tells none.
	Passed func(cursor string)
}

// Watch streams the committed changes that q selects (one namespace, or
// one key of a namespace; Namespace "" for every namespace), oldest first,
// from q.Cursor on (from the start of the trail when it is empty; see
// [Tail] to start from now), until ctx ends. It reads as a follower
// (Query.Follow), so a record that commits out of id order on PostgreSQL
// is never skipped: a watcher may lag writers in flight, and a transaction
// left open in the cluster holds it back, but it sees every change once,
// in order.
//
// Each record is yielded with a nil error; resume a later watch after it
// with q.Cursor = EncodeCursor(rec.ID). That cursor carries no prune batch
// ([EncodePrunedCursor]), so on PostgreSQL resuming from a record below
// what an earlier prune removed (one committed late by a transaction open
// during the prune) is refused as behind it: resume from the position
// [WatchConfig].Passed last told instead, which carries it. A read that fails is yielded as
// (Record{}, err) and retried after the interval; an invalid q (or a read
// answered invalid: a cursor past the end of the trail, [CheckCursorEnd]),
// a cursor behind a prune (an error matching [ErrPruned]: the records after it are
// gone), a reader that answers closed (an error matching
// [protocol.ErrClosed]: its handle or runtime was closed, and it never
// answers again), one that refuses every operation until its process
// restarts ([protocol.ErrRestartRequired]: a SQLite file put back under
// it, an etcd cluster whose revision went back) and one that refuses the credentials or their permission
// ([protocol.ErrUnauthenticated], [protocol.ErrForbidden]: refused again
// until they change) are yielded once and end the stream. The stream ends
// without an error when ctx ends, or when the caller stops ranging.
//
// When r streams the trail itself (a [Follower], or a [RuntimeReader] of a
// backend that is one, such as httpapi.Client), Watch is its Follow, and
// cfg's Interval and HeldBack do not apply (nor Passed, unless r is a
// [PositionFollower]).
func Watch(ctx context.Context, r Reader, q Query, cfg *WatchConfig) iter.Seq2[Record, error] {
	c := cfg.withDefaults()
	q.Follow = true
	q.Since = time.Time{}
	if f, ok := FollowerOf(r); ok {
		if pf, ok := f.(PositionFollower); ok && c.Passed != nil {
			return pf.FollowPositions(ctx, q, c.Passed)
		}
		return f.Follow(ctx, q)
	}
	return func(yield func(Record, error) bool) {
		if err := q.Validate(); err != nil {
			yield(Record{}, err)
			return
		}
		var heldSince time.Time
		for {
			rctx, cancel := context.WithTimeout(ctx, c.ReadTimeout)
			page, err := r.ReadAudit(rctx, q)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil && page.HeldBack && len(page.Records) == 0 {
				if heldSince.IsZero() {
					heldSince = time.Now()
				}
				if c.HeldBack != nil {
					c.HeldBack(time.Since(heldSince))
				}
			} else if err == nil {
				heldSince = time.Time{}
			}
			if err != nil {
				if st := protocol.StatusOf(err); !yield(Record{}, err) || errors.Is(err, ErrPruned) || st == protocol.StatusClosed ||
					st == protocol.StatusInvalid || protocol.CredentialsRefused(err) || errors.Is(err, protocol.ErrRestartRequired) {
					return
				}
			}
			for _, rec := range page.Records {
				if !yield(rec, nil) {
					return
				}
				q.Cursor = EncodeCursor(rec.ID)
			}
			if err == nil {
				// Past the records the read passed over, so that a prune
				// of them leaves the watch ahead of it.
				q.Cursor = page.Resume(q.Cursor)
				if c.Passed != nil {
					c.Passed(q.Cursor)
				}
			}
			if err == nil && page.NextCursor != "" {
				continue // more records are waiting: no pause
			}
			t := time.NewTimer(c.Interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// Follower is implemented by readers that stream the trail's records as
// they commit instead of being read page by page: httpapi.Client, over the
// server's GET /v1/audit/follow. Follow behaves as [Watch]: the records
// that q selects after q.Cursor (from the start when empty), oldest first,
// each once, until ctx ends or the caller stops ranging; a failure is
// yielded as (Record{}, err) and the stream goes on when it can (an
// invalid q, and an answer of status closed, are yielded once and end it).
type Follower interface {
	Follow(ctx context.Context, q Query) iter.Seq2[Record, error]
}

// PositionFollower is a [Follower] whose stream also tells how far it has
// read past the records it yields (httpapi.Client: the follow route's
// position events; the etcd backend: its reads' and watch's revisions). FollowPositions is its Follow that calls passed with
// each position, as [WatchConfig].Passed: the cursor the follow reads on
// from, past the records q does not select that it went over, so that a
// prune of them leaves it ahead of the prune. passed is called in the
// goroutine ranging over the stream; nil calls nothing.
type PositionFollower interface {
	Follower
	FollowPositions(ctx context.Context, q Query, passed func(cursor string)) iter.Seq2[Record, error]
}

// FollowerOf returns r as a [Follower] when it streams the trail itself:
// r is one, or r is a [RuntimeReader] whose runtime's backend is one.
func FollowerOf(r Reader) (Follower, bool) {
	switch r := r.(type) {
	case Follower:
		return r, true
	case runtimeReader:
		return r.follower()
	}
	return nil, false
}

// withDefaults returns c (nil for all defaults) with its defaults filled in.
func (c *WatchConfig) withDefaults() WatchConfig {
	out := WatchConfig{Interval: DefaultWatchInterval, ReadTimeout: 5 * time.Second}
	if c != nil {
		out.HeldBack, out.Passed = c.HeldBack, c.Passed
		if c.Interval > 0 {
			out.Interval = c.Interval
		}
		if c.ReadTimeout > 0 {
			out.ReadTimeout = c.ReadTimeout
		}
	}
	return out
}

// Start returns the cursor a watch of q starts after: q.Cursor when set
// (refused when a read from it is answered invalid, as a cursor past the
// end of the trail is);
// else, when q.Since is set, the cursor just before the first record at
// or after it (when a follower sees none yet, how far its read went, which
// is before any record held back; the end of the trail when the reader
// does not tell); else
// the end of the trail ([Tail]), so that only the changes committed from
// now on follow. Each read is bounded by cfg's ReadTimeout (cfg may be nil).
func Start(ctx context.Context, r Reader, q Query, cfg *WatchConfig) (string, error) {
	if q.Cursor != "" {
		// One read from it, so that a cursor the store refuses (past the
		// end of its trail) is refused before the watch starts; any other
		// failure is the watch's to meet.
		probe := q
		probe.Limit, probe.Follow, probe.Newest, probe.Since = 1, true, false, time.Time{}
		rctx, cancel := context.WithTimeout(ctx, cfg.withDefaults().ReadTimeout)
		_, err := r.ReadAudit(rctx, probe)
		cancel()
		if protocol.StatusOf(err) == protocol.StatusInvalid {
			return "", err
		}
		return q.Cursor, nil
	}
	if !q.Since.IsZero() {
		probe := q
		probe.Limit, probe.Follow, probe.Newest = 1, true, false
		rctx, cancel := context.WithTimeout(ctx, cfg.withDefaults().ReadTimeout)
		page, err := r.ReadAudit(rctx, probe)
		cancel()
		if err != nil {
			return "", err
		}
		if len(page.Records) > 0 {
			return EncodeCursor(page.Records[0].ID - 1), nil
		}
		// None yet: the read went as far as its FollowCursor, never past a
		// record still held back. The end of the trail, read again, may be
		// past one that came out meanwhile (a transaction of the cluster
		// ended), which the watch would then never see.
		if _, err := DecodeCursor(page.FollowCursor); err == nil {
			return page.FollowCursor, nil
		}
	}
	return Tail(ctx, r, q, cfg)
}

// Tail returns the cursor after the last record of the trail that q
// selects (q.Cursor, q.Since and q.Newest are ignored), so that [Watch] from it
// yields only the changes committed from now on. When the trail holds no
// record q selects, it answers how far a follower's read of the whole
// trail went ([Page.FollowCursor]), past the records q does not select:
// "a1.0" when the trail is empty (etcd: the revision read), a position
// that, unlike "", the start, is checked against prunes, so that a
// follower from there hears of records written and pruned before its
// first read ([ErrPruned]). It answers "" only when the trail holds no
// record q selects and r tells no FollowCursor. A position is answered as
// the reader's FollowCursor names it, so that it keeps what the reader
// adds: on PostgreSQL, below what a prune removed, the last prune batch
// ([EncodePrunedCursor]) that keeps a follower that started after the
// prune ahead of it. Each read is bounded by cfg's ReadTimeout (cfg may
// be nil).
//
// Readers page oldest first only, so the end is found by reading back from
// now in growing windows (1s, 8s, about a minute, ... then the whole
// trail) until one holds a record, and paging to its end. Only ids order
// the result, so no clock skew can make it skip a record: a window that
// misses just widens. The reads are a follower's: records still held back
// come later, through Watch.
func Tail(ctx context.Context, r Reader, q Query, cfg *WatchConfig) (string, error) {
	c := cfg.withDefaults()
	now := time.Now()
	probe := q
	probe.Follow, probe.Limit, probe.Cursor, probe.Newest = true, MaxLimit, "", false
	for window := time.Second; ; window *= 8 {
		probe.Since = now.Add(-window)
		if window > 100*365*24*time.Hour {
			probe.Since = time.Time{}
		}
		last, passed, lastID := "", "", int64(0)
		probe.Cursor = ""
		for {
			rctx, cancel := context.WithTimeout(ctx, c.ReadTimeout)
			page, err := r.ReadAudit(rctx, probe)
			cancel()
			if err != nil {
				return "", err
			}
			if n := len(page.Records); n > 0 {
				lastID = page.Records[n-1].ID
				last = EncodeCursor(lastID)
				probe.Cursor = last
			}
			passed = page.FollowCursor
			if page.NextCursor == "" || len(page.Records) < probe.EffectiveLimit() {
				break
			}
		}
		if last != "" {
			if at, err := DecodeCursor(passed); err == nil && at == lastID {
				// The same position, as the reader issued it: on
				// PostgreSQL with the prune batch it may carry.
				return passed, nil
			}
			return last, nil
		}
		if probe.Since.IsZero() {
			// Nothing q selects: the end is how far the read of the whole
			// trail went (past the others' records; "a1.0" in an empty
			// trail), so that a prune of records q selects written after
			// now is seen (ErrPruned), not skipped; the start when the
			// reader does not tell.
			if _, err := DecodeCursor(passed); err != nil {
				return "", nil
			}
			return passed, nil
		}
	}
}
