package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

var (
	_ protocol.NamespaceLister = (*Client)(nil)
	_ protocol.BulkRenewer     = (*Client)(nil)
	_ audit.PositionFollower   = (*Client)(nil)
)

// opFollow names an audit follow in the client's errors.
const opFollow protocol.Op = "follow"

// Namespaces implements [protocol.NamespaceLister] over GET
// /v1/namespaces: the namespaces that hold live leases and that the
// client's token may read.
func (c *Client) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	const op = protocol.OpNamespaces
	// The route takes 0 as its default page; NamespaceLister does not.
	if err := backendkit.CheckNamespacesLimit(limit); err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	code, body, err := c.do(ctx, op, call{method: http.MethodGet, path: "/v1/namespaces", query: q})
	if err != nil {
		return nil, err
	}
	var out wire.NamespacePage
	absent, err := wire.Decode(body, &out)
	if err != nil || out.Status == "" {
		return nil, badAnswer(op, code, body)
	}
	status := protocol.Status(out.Status)
	if code == http.StatusNotImplemented && status == StatusNotImplemented {
		return nil, backendkit.NewError(op, protocol.StatusUnavailable, nil, "server: %s", out.Message)
	}
	if err := answerError(op, code, status, out.Message, out.ErrorCode); err != nil {
		return nil, err
	}
	if status != protocol.StatusFound {
		return nil, backendkit.NewError(op, status, nil, "server: %s", out.Message)
	}
	if absent != nil {
		return nil, backendkit.NewError(op, protocol.StatusUnavailable, absent, "httpapi: the server's answer does not parse")
	}
	return out.Namespaces, nil
}

// RenewMany implements [protocol.BulkRenewer] over POST /v1/renew-many, in
// requests of at most [MaxRenewManyRequest] renewals and
// [MaxRenewManyBodyBytes] of body (one round trip each; the server's store
// renews each request's batch in one when it can). Each renewal keeps its
// own outcome, audit record and request id: a request the server did not
// answer gives each of its renewals its failure ([backendkit.Unanswered])
// while the others keep theirs, and the next requests still go. It returns
// an error (the first request's) only when no request was answered.
func (c *Client) RenewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	out := make([]protocol.Result, 0, len(reqs))
	var first error
	answered := false
	for chunk := range renewManyChunks(reqs) {
		got, err := c.renewMany(ctx, chunk)
		if err != nil {
			if first == nil {
				first = err
			}
			res := backendkit.Unanswered(err)
			for range chunk {
				out = append(out, res)
			}
			continue
		}
		answered = true
		out = append(out, got...)
	}
	if !answered && first != nil {
		return nil, first
	}
	return out, nil
}

// renewManyChunks splits reqs into the batches of POST /v1/renew-many: at
// most MaxRenewManyRequest renewals whose body, encoded as renewMany
// encodes it, fits in MaxRenewManyBodyBytes (1,000 renewals of long keys
// and owners would not). One renewal always fits: its fields are bounded.
func renewManyChunks(reqs []protocol.RenewRequest) iter.Seq[[]protocol.RenewRequest] {
	const envelope = len(`{"renewals":[]}`)
	return func(yield func([]protocol.RenewRequest) bool) {
		for len(reqs) > 0 {
			k, size := 0, envelope
			for ; k < len(reqs) && k < MaxRenewManyRequest; k++ {
				b, _ := json.Marshal(renewalOf(reqs[k]))
				if size += len(b) + 1; k > 0 && size > MaxRenewManyBodyBytes { // the renewal and a comma
					break
				}
			}
			if !yield(reqs[:k]) {
				return
			}
			reqs = reqs[k:]
		}
	}
}

func (c *Client) renewMany(ctx context.Context, reqs []protocol.RenewRequest) ([]protocol.Result, error) {
	const op = protocol.OpRenew
	body := renewManyBody{Renewals: make([]renewBody, len(reqs))}
	for i, r := range reqs {
		body.Renewals[i] = renewalOf(r)
	}
	code, raw, err := c.do(ctx, op, call{method: http.MethodPost, path: "/v1/renew-many", body: body})
	if err != nil {
		return nil, err
	}
	var out wire.RenewManyPage
	absent, err := wire.Decode(raw, &out)
	if err != nil || out.Status == "" {
		return nil, badAnswer(op, code, raw)
	}
	status := protocol.Status(out.Status)
	if err := answerError(op, code, status, out.Message, out.ErrorCode); err != nil {
		return nil, err
	}
	if status != protocol.StatusFound {
		return nil, backendkit.NewError(op, status, nil, "server: %s", out.Message)
	}
	if absent != nil {
		return nil, backendkit.NewError(op, protocol.StatusUnavailable, absent, "httpapi: the server's answer does not parse")
	}
	if len(out.Results) != len(reqs) {
		return nil, backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered %d results for %d renewals",
			len(out.Results), len(reqs))
	}
	results := make([]protocol.Result, len(reqs))
	for i, r := range out.Results {
		if results[i], err = r.Protocol(op); err != nil {
			return nil, backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: the server's answer does not parse")
		}
	}
	return results, nil
}

// followRetryPolls is how many polls a [Client.Follow] makes, once the
// follow route answered 404, before it tries the stream again: 5s at
// [audit.DefaultWatchInterval]. The 404 may be a proxy's during a deploy,
// and against an older server the try costs one 404 per that many polls.
const followRetryPolls = 25

// pollBudget is a Client's audit reader that allows left reads, then
// calls spent (which ends the watch reading it) and fails the next. It
// hides the Client's Follow, so that audit.Watch polls it; a watch reads
// one page at a time, so it needs no lock. A read without a cursor reads
// from since (audit.Watch drops a query's Since): until a read gave the
// watch a cursor, the follow starts at the first record at or after it,
// as the follow route does.
type pollBudget struct {
	c     *Client
	left  int
	since time.Time
	spent context.CancelFunc
}

func (p *pollBudget) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	if p.left <= 0 {
		p.spent()
		return audit.Page{}, context.Canceled
	}
	p.left--
	if q.Cursor == "" {
		q.Since = p.since
	}
	return p.c.ReadAudit(ctx, q)
}

// poll follows q by polling ([audit.Watch]) for followRetryPolls reads,
// yielding what it reads and telling passed (nil: nobody) how far each
// read went, and returns the cursor it reads on from: after the last
// record yielded, or past the records its reads passed over; ended is set
// when following must stop (the caller stopped ranging, ctx ended, the
// cursor is behind a prune, the served store needs a restart, or the
// client was closed).
func (c *Client) poll(ctx context.Context, q audit.Query, passed func(string), yield func(audit.Record, error) bool) (cursor string, ended bool) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := &audit.WatchConfig{Passed: func(cursor string) {
		q.Cursor = cursor
		if passed != nil {
			passed(cursor)
		}
	}}
	budget := &pollBudget{c: c, left: followRetryPolls, since: q.Since, spent: cancel}
	for rec, err := range audit.Watch(wctx, budget, q, cfg) {
		if !yield(rec, err) || errors.Is(err, audit.ErrPruned) || protocol.StatusOf(err) == protocol.StatusClosed ||
			errors.Is(err, protocol.ErrRestartRequired) {
			return q.Cursor, true
		}
		if err == nil {
			q.Cursor = audit.EncodeCursor(rec.ID)
		}
	}
	return q.Cursor, ctx.Err() != nil
}

// Follow implements [audit.Follower] over GET /v1/audit/follow (from the
// start of the trail when q has neither Cursor nor Since: its first page
// read with GET /v1/audit, the stream from where that read left off, since
// the route without a cursor starts at the end and a cursor of a1.0 is a
// position behind any prune): the server
// streams each record as it commits, so a watcher over HTTP neither polls
// nor lags a poll interval. When the stream breaks, the client reconnects
// after the last record it yielded (pausing 50ms doubling up to 5s), so no
// record is skipped or repeated; a failure is yielded as (Record{}, err)
// and the stream goes on, except a refusal (invalid query, 401, 403), a
// cursor behind a prune (matching audit.ErrPruned), a served store that
// refuses every operation until the server restarts (matching
// protocol.ErrRestartRequired: error_code restart_required), a subscribed,
// record or position event the client cannot read (a protocol error: the
// server would send it again), and the client's Close (status closed,
// yielded at once, whether the follow streams, polls or pauses), which
// end it. The
// server's store closed is yielded as unavailable, as the client's other
// calls answer it, and the client reconnects. When
// the route answers 404 (a server older than it, or a proxy in front of
// the server during a deploy), the client polls as [audit.Watch] does,
// trying the stream again after every 25 polls (5s at
// audit.DefaultWatchInterval), and streams again once the route answers.
//
// The stream's position events (how far the server read, past records q
// does not select) move the cursor it reconnects from, so that a prune of
// other keys' records while it is away does not leave it behind the prune.
func (c *Client) Follow(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error] {
	return c.FollowPositions(ctx, q, nil)
}

// FollowPositions implements [audit.PositionFollower]: it is [Client.Follow],
// calling passed (when not nil) with each position the stream tells (and,
// while it polls, with where each read of the trail left it): the cursor
// it reads on from, past the records it went over that q does not select.
// A server older than position events tells none.
func (c *Client) FollowPositions(ctx context.Context, q audit.Query, passed func(cursor string)) iter.Seq2[audit.Record, error] {
	q.Follow = true // a follower's read: Validate refuses Newest
	return func(yield func(audit.Record, error) bool) {
		if err := q.Validate(); err != nil {
			yield(audit.Record{}, backendkit.NewError(protocol.OpAudit, protocol.StatusInvalid, err, "audit: bad query"))
			return
		}
		// Close cuts the follow wherever it is (streaming, polling or
		// pausing between reconnects): it cancels lctx, the follow's own.
		lctx, lcancel := context.WithCancel(ctx)
		defer lcancel()
		f, open := c.openFollow(lcancel)
		if !open {
			yield(audit.Record{}, clientClosed(opFollow))
			return
		}
		defer c.closeFollow(f)
		stopped, told := false, false // the caller stopped ranging; closed was yielded
		yieldOn := func(r audit.Record, err error) bool {
			told = told || protocol.StatusOf(err) == protocol.StatusClosed
			if !yield(r, err) {
				stopped = true
				return false
			}
			return true
		}
		// endClosed ends the follow with closed once Close began, unless
		// the caller stopped ranging.
		endClosed := func() bool {
			if !c.closed.Load() {
				return false
			}
			if !stopped && !told {
				yield(audit.Record{}, clientClosed(opFollow))
			}
			return true
		}
		backoff := reconnectMinBackoff
		for ctx.Err() == nil {
			if endClosed() {
				return
			}
			opened := time.Now()
			cursor, err, final := c.followOnce(lctx, q, passed, yieldOn)
			q.Cursor = cursor
			if endClosed() || stopped {
				return
			}
			switch {
			case errors.Is(err, errNoRoute):
				var ended bool
				if q.Cursor, ended = c.poll(lctx, q, passed, yieldOn); ended {
					endClosed()
					return
				}
				backoff = reconnectMinBackoff
				continue // polled for a while: try the stream again at once
			case final:
				if err != nil {
					yield(audit.Record{}, err)
				}
				return
			case err != nil && ctx.Err() == nil:
				if !yield(audit.Record{}, err) {
					return
				}
			}
			if time.Since(opened) > reconnectMaxBackoff {
				backoff = reconnectMinBackoff
			}
			pause := time.NewTimer(backoff)
			select {
			case <-lctx.Done():
				pause.Stop()
				endClosed()
				return
			case <-pause.C:
			}
			backoff = min(2*backoff, reconnectMaxBackoff)
		}
	}
}

// followStart reads the first page of q from the beginning of the trail
// (GET /v1/audit without a cursor, which every server reads from the
// beginning, whatever a prune removed), yielding its records and telling
// passed (when not nil) where the read left off past them, and returns the
// cursor to stream from: where the read left off (its page's follow
// cursor: "a1.0" in an empty trail), else after its last record, else
// "a1.0" (a server that tells no follow cursor reads a1.0 as the
// beginning). final and err are as [Client.followOnce]'s.
func (c *Client) followStart(ctx context.Context, q audit.Query, passed func(string),
	yield func(audit.Record, error) bool) (cursor string, err error, final bool) {
	rctx, cancel := context.WithTimeout(ctx, protocol.DefaultTimeout) // as the stream's opening
	page, err := c.ReadAudit(rctx, q)
	cancel()
	if err != nil {
		var refused *RefusedError
		return "", err, protocol.StatusOf(err) == protocol.StatusInvalid || errors.As(err, &refused) ||
			errors.Is(err, protocol.ErrRestartRequired)
	}
	for _, rec := range page.Records {
		if !yield(rec, nil) {
			return cursor, nil, true
		}
		cursor = audit.EncodeCursor(rec.ID)
	}
	if next := page.Resume(cursor); next != cursor {
		cursor = next
		if passed != nil {
			passed(cursor)
		}
	}
	if cursor == "" {
		cursor = audit.EncodeCursor(0)
	}
	return cursor, nil, false
}

// errNoRoute reports a server without GET /v1/audit/follow.
var errNoRoute = errors.New("httpapi: the server has no audit follow route")

// followOnce runs one follow stream from q.Cursor, yielding its records
// and telling passed (when not nil) its positions, and returns the cursor
// to reconnect from: after the last record yielded, or the last position
// past it; final is set when the caller stopped ranging, the server
// refused the query, or it sent an event the client cannot read (then err
// says why).
func (c *Client) followOnce(ctx context.Context, q audit.Query, passed func(string),
	yield func(audit.Record, error) bool) (cursor string, err error, final bool) {
	cursor = q.Cursor
	if cursor == "" && q.Since.IsZero() {
		// The interface starts at the beginning of the trail, which the
		// route cannot name: without a cursor it starts at the end, and
		// a1.0 is a position, behind any prune. Read the beginning, then
		// stream from where that read left off.
		if cursor, err, final = c.followStart(ctx, q, passed, yield); err != nil || final {
			return cursor, err, final
		}
		q.Cursor = cursor
	}
	v := url.Values{}
	for name, val := range map[string]string{"namespace": q.Namespace, "key": q.Key, "cursor": q.Cursor,
		"op": audit.FormatOps(q.Ops), "owner": q.Owner} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if q.Cursor == "" && !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	octx, ocancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer ocancel()
	deadline, _ := octx.Deadline()
	req, err := c.newRequest(sctx, http.MethodGet, c.url("/v1/audit/follow", v), nil, "text/event-stream", deadline)
	if err != nil {
		return cursor, c.transportError(octx, opFollow, err), false
	}
	stopOpening := context.AfterFunc(octx, cancel)
	resp, err := c.hc.Do(req)
	if err != nil {
		stopOpening()
		return cursor, c.transportError(octx, opFollow, err), false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		stopOpening()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxEventLine))
		if resp.StatusCode == http.StatusNotFound {
			// The route never answers 404: this server has none (an older
			// one answers its JSON body of an unknown route; a proxy, a page).
			return cursor, errNoRoute, false
		}
		var out wire.Error
		if err := json.Unmarshal(body, &out); err != nil || out.Status == "" {
			return cursor, badAnswer(opFollow, resp.StatusCode, body), false
		}
		status := protocol.Status(out.Status)
		if err := answerError(opFollow, resp.StatusCode, status, out.Message, out.ErrorCode); err != nil {
			var refused *RefusedError
			return cursor, err, errors.As(err, &refused) || errors.Is(err, protocol.ErrRestartRequired)
		}
		return cursor, backendkit.NewError(opFollow, status, nil, "server: %s", out.Message), status == protocol.StatusInvalid
	}
	st := newStream(resp.Body)
	name, data, err := st.next()
	if !stopOpening() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		return cursor, c.transportError(octx, opFollow, err), false
	}
	if st.window, err = streamStart(opFollow, name, data); err != nil {
		return cursor, err, isMalformed(err)
	}
	st.silence = time.AfterFunc(st.window, cancel)
	defer st.silence.Stop()
	for {
		name, data, err := st.next()
		if err != nil {
			if ctx.Err() != nil {
				return cursor, nil, true
			}
			return cursor, backendkit.NewError(opFollow, protocol.StatusUnavailable, err, "httpapi: the audit follow stream broke"), false
		}
		switch name {
		case eventRecord:
			var wr wire.Record
			absent, err := wire.Decode(data, &wr)
			if err != nil {
				return cursor, malformedEvent(opFollow, name, data, err), true
			}
			err = absent
			var rec audit.Record
			if err == nil {
				rec, err = wr.Audit()
			}
			if err != nil {
				return cursor, malformedEvent(opFollow, name, data, err), true
			}
			if !yield(rec, nil) {
				return cursor, nil, true
			}
			cursor = audit.EncodeCursor(rec.ID)
		case eventPosition:
			var p wire.FollowPosition
			if err := json.Unmarshal(data, &p); err != nil {
				return cursor, malformedEvent(opFollow, name, data, err), true
			}
			id, err := audit.DecodeCursor(p.Cursor)
			if err != nil {
				return cursor, malformedEvent(opFollow, name, data, fmt.Errorf("cursor %q does not parse: %w", p.Cursor, err)), true
			}
			if at, _ := audit.DecodeCursor(cursor); id > at { // "" (the start) is 0
				cursor = p.Cursor
				if passed != nil {
					passed(cursor)
				}
			}
		case eventError, eventEnd:
			var ev wire.NotifyEvent
			_ = json.Unmarshal(data, &ev)
			status := protocol.Status(ev.Status)
			if refusedStatus(status) {
				return cursor, backendkit.NewError(opFollow, protocol.StatusUnavailable,
					&RefusedError{Code: StatusCode(status), Status: status, Message: ev.Message}, "httpapi"), true
			}
			if !status.Known() || status.Success() {
				status = protocol.StatusUnavailable
			}
			if err := prunedError(opFollow, ev.Message); err != nil && status == protocol.StatusUnavailable {
				return cursor, err, true // the cursor stays behind the prune: following again cannot help
			}
			if ev.ErrorCode == ErrorCodeRestartRequired && status == protocol.StatusUnavailable {
				return cursor, restartRequired(opFollow, ev.Message), true // the server's store refuses everything until restarted
			}
			var err error = backendkit.NewError(opFollow, status, nil, "server: %s", ev.Message)
			if status == protocol.StatusClosed { // the server's store, not this client: follow again
				err = serverClosed(opFollow, ev.Message)
			}
			if name == eventEnd {
				return cursor, err, false
			}
			if !yield(audit.Record{}, err) {
				return cursor, nil, true
			}
		}
	}
}
