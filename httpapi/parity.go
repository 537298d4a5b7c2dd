package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// The routes that give the HTTP API what the Go API has: the namespaces
// that hold live leases, renewing many leases in one request, and
// following the audit trail as a stream.
//
//	GET  /v1/namespaces?after=&limit=
//	POST /v1/renew-many   {"renewals":[{"namespace","key","owner","token","ttl"?,"request_id"?}, ...]}
//	GET  /v1/audit/follow?namespace=&key=&cursor=&since=&op=&owner=   server-sent events

// MaxRenewManyRequest bounds the renewals of one POST /v1/renew-many, and
// MaxRenewManyBodyBytes its body (the 64 KiB of every body: about 400
// renewals of short keys); the Go client splits larger batches.
const (
	MaxRenewManyRequest   = 1000
	MaxRenewManyBodyBytes = MaxBodyBytes
)

// Events of the audit follow stream besides subscribed and end: a record
// (data: the record object, as in an audit page), a read of the trail
// that failed (data: {"status","message"}; the stream goes on), and a
// position (data: {"cursor"}): how far the stream has read, past records
// it went over that its query does not select, so that a client resumes
// from there rather than from its last record, which a prune of those
// records would leave behind it.
const (
	eventRecord   = "record"
	eventError    = "error"
	eventPosition = "position"
)

// positionEvery is the least time between two position events of one
// follow stream: a stream that passes over other keys' records all the
// time tells its client where it is once a second, not after every read.
const positionEvery = time.Second

func namespaceShape(s protocol.Status, msg, _, errorCode string) any {
	return wire.NamespacePage{Status: string(s), Namespaces: []string{}, Message: msg, ErrorCode: errorCode}
}

func renewManyShape(s protocol.Status, msg, _, errorCode string) any {
	return wire.RenewManyPage{Status: string(s), Results: []wire.Result{}, Message: msg, ErrorCode: errorCode}
}

// namespacesQuery is a request of GET /v1/namespaces.
type namespacesQuery struct {
	after string
	limit int
}

// lister returns the served store's namespace listing: the store's own, or
// its runtime's backend's (through the runtime, as leasectl does); nil when
// it has none.
func (h *Handler) lister() func(ctx context.Context, after string, limit int) ([]string, error) {
	if nl, ok := h.store.(protocol.NamespaceLister); ok {
		return nl.Namespaces
	}
	rt, ok := h.store.(interface {
		Do(ctx context.Context, op protocol.Op, fn func(ctx context.Context, b protocol.Backend) error) error
	})
	if !ok {
		return nil
	}
	return func(ctx context.Context, after string, limit int) (page []string, err error) {
		supported := false
		err = rt.Do(ctx, protocol.OpNamespaces, func(ctx context.Context, b protocol.Backend) error {
			nl, ok := b.(protocol.NamespaceLister)
			if !ok {
				return nil
			}
			supported = true
			page, err = nl.Namespaces(ctx, after, limit)
			return err
		})
		if err == nil && !supported {
			return nil, errNoLister
		}
		return page, err
	}
}

// errNoLister reports a served store that cannot list namespaces.
var errNoLister = errors.New("the served store cannot list namespaces")

// serveNamespaces answers the namespaces that hold live leases, after
// ?after= (exclusive), up to ?limit= (0 to protocol.MaxListLimit; 0, empty
// or absent: protocol.DefaultListLimit, as list and audit), in byte order. A token sees the namespaces
// its globs allow; fewer than limit means there are no more.
func (h *Handler) serveNamespaces(x *exchange) {
	serve(h, x, route[namespacesQuery]{op: protocol.OpList, verb: "list namespaces", shape: namespaceShape, anyNamespace: true,
		decode: func(x *exchange, _ []byte, _ string) (namespacesQuery, string, error) {
			q, err := query(x.r)
			if err != nil {
				return namespacesQuery{}, "", err
			}
			if err := queryParams(q, "after", "limit"); err != nil {
				return namespacesQuery{}, "", err
			}
			limit, err := parseLimit(q.Get("limit"))
			switch {
			case err != nil:
			case limit < 0 || limit > protocol.MaxListLimit:
				err = fmt.Errorf("limit: %d is outside [0, %d]", limit, protocol.MaxListLimit)
			case limit == 0: // as list and audit take it
				limit = protocol.DefaultListLimit
			}
			// after is a namespace, or a place between two: text no
			// namespace can hold (not UTF-8, NUL) is refused here, not
			// by the store (PostgreSQL refuses it as an error of its own).
			if a := q.Get("after"); err == nil && a != "" {
				err = textfield.Validate("after", a, protocol.MaxNamespaceLen)
			}
			return namespacesQuery{after: q.Get("after"), limit: limit}, "", err
		},
		run: func(ctx context.Context, x *exchange, q namespacesQuery) {
			list := h.lister()
			if list == nil {
				h.refusal(x, StatusNotImplemented, http.StatusNotImplemented, "namespaces: "+errNoLister.Error(), namespaceShape)
				return
			}
			out := []string{}
			// A token that sees only some namespaces skips the others:
			// read full pages then, not q.limit at a time (a limit of 1
			// cost a store call per namespace skipped). The answer ends
			// at the last namespace it holds, the next request's after.
			size := q.limit
			if x.principal != nil {
				size = protocol.MaxListLimit
			}
			for after := q.after; len(out) < q.limit; {
				page, err := list(ctx, after, size)
				if errors.Is(err, errNoLister) {
					h.refusal(x, StatusNotImplemented, http.StatusNotImplemented, "namespaces: "+errNoLister.Error(), namespaceShape)
					return
				}
				if err != nil {
					h.failure(ctx, x, err, namespaceShape)
					return
				}
				for _, ns := range page {
					if len(out) < q.limit && (x.principal == nil || x.principal.allows(protocol.OpList, ns)) {
						out = append(out, ns)
					}
				}
				if len(page) < size {
					break
				}
				after = page[len(page)-1]
			}
			h.write(x, http.StatusOK, protocol.StatusFound, wire.NamespacePage{Status: string(protocol.StatusFound), Namespaces: out})
		}})
}

// renewMany is a request of POST /v1/renew-many: its renewals, and which
// of them gave no token (nil when all did).
type renewMany struct {
	reqs    []protocol.RenewRequest
	noToken []bool
}

// tokensMissing reports, for each of the n renewals of a renew-many body
// that decodeJSON took, whether it gives no token (or a null one).
func tokensMissing(body []byte, n int) []bool {
	var b struct {
		Renewals []struct {
			Token *json.RawMessage `json:"token"`
		} `json:"renewals"`
	}
	out := make([]bool, n)
	if json.Unmarshal(body, &b) != nil {
		return out
	}
	for i, r := range b.Renewals {
		if i < n {
			out[i] = r.Token == nil
		}
	}
	return out
}

// renewManyBody is the body of POST /v1/renew-many.
type renewManyBody struct {
	Renewals []renewBody `json:"renewals"`
}

// serveRenewMany renews each renewal as POST /v1/renew would (each with
// its own outcome, audit record and request id) in one request: the
// store's bulk renewal when it has one (one round trip on PostgreSQL).
// A renewal the store refuses (invalid, not_owner, expired...) fails
// alone, in its result; a request that does not decode (malformed JSON,
// an unknown field, no renewal or too many, a ttl that does not parse or
// is 0s) is refused whole, 400, as /openapi.json says.
//
// A renewal without a token is sent on with token 0, so that it fails
// alone as the store's other invalid renewals do, and its result says the
// token is required (errTokenRequired) rather than that 0 is not positive.
func (h *Handler) serveRenewMany(x *exchange) {
	// nsRequired: a renewal in namespace "" is the store's invalid, in its
	// own result, for every token alike (as POST /v1/renew answers it),
	// so serve checks only the role when the first renewal's is "".
	serve(h, x, route[renewMany]{op: protocol.OpRenew, verb: "renew", shape: renewManyShape, maxBody: MaxRenewManyBodyBytes, nsRequired: true,
		decode: func(x *exchange, body []byte, idem string) (renewMany, string, error) {
			var b renewManyBody
			if err := decodeJSON(body, &b); err != nil {
				return renewMany{}, "", err
			}
			if err := noQuery(x, "renew many"); err != nil {
				return renewMany{}, "", err
			}
			if idem != "" {
				return renewMany{}, "", errors.New("renew many: the Idempotency-Key header names one request: give each renewal its request_id")
			}
			switch {
			case len(b.Renewals) == 0:
				return renewMany{}, "", errors.New("renewals: none: want 1 to " + strconv.Itoa(MaxRenewManyRequest))
			case len(b.Renewals) > MaxRenewManyRequest:
				return renewMany{}, "", fmt.Errorf("renewals: %d, at most %d in one request", len(b.Renewals), MaxRenewManyRequest)
			}
			reqs := make([]protocol.RenewRequest, len(b.Renewals))
			var noToken []bool
			for i, r := range b.Renewals {
				if r.Token == 0 && noToken == nil {
					noToken = tokensMissing(body, len(reqs))
				}
				ttl, err := parseTTL(r.TTL)
				if err != nil {
					return renewMany{}, "", fmt.Errorf("renewals[%d]: %w", i, err)
				}
				reqs[i] = protocol.RenewRequest{Key: protocol.Key{Namespace: r.Namespace, Name: r.Key}, Owner: r.Owner,
					Token: r.Token, TTL: ttl, RequestID: r.RequestID}
			}
			return renewMany{reqs: reqs, noToken: noToken}, reqs[0].Key.Namespace, nil
		},
		run: func(ctx context.Context, x *exchange, many renewMany) {
			reqs := many.reqs
			var seen []string
			for _, r := range reqs {
				// A renewal in "" needs only the role, which serve checked:
				// the store answers it invalid in its result.
				if ns := r.Key.Namespace; ns != "" && !slices.Contains(seen, ns) {
					if !h.authorize(x, x.principal, protocol.OpRenew, "renew", ns, renewManyShape) {
						return
					}
					seen = append(seen, ns)
				}
			}
			var results []protocol.Result
			var err error
			if br, ok := h.store.(protocol.BulkRenewer); ok {
				results, err = br.RenewMany(ctx, reqs)
			} else {
				results = make([]protocol.Result, len(reqs))
				for i, r := range reqs {
					var rerr error
					results[i], rerr = h.store.Renew(ctx, r)
					if s := protocol.StatusOf(rerr); err == nil && (s == protocol.StatusTimeout || s == protocol.StatusUnavailable || s == protocol.StatusClosed) {
						err = rerr // the store did not answer: say so for the request as a whole
					}
				}
			}
			status := protocol.StatusFound
			if err != nil {
				status, x.errorCode = failedStatus(ctx, err), errorCodeOf(err)
			}
			if results == nil { // refused as a whole (invalid): nothing was sent
				h.refusal(x, protocol.StatusOf(err), StatusCode(protocol.StatusOf(err)), h.storeMessage(x, protocol.StatusOf(err), err.Error()), renewManyShape)
				return
			}
			out := wire.RenewManyPage{Status: string(status), Results: make([]wire.Result, len(results)), ErrorCode: x.errorCode}
			for i, res := range results {
				if res.Status == protocol.StatusInvalid && i < len(many.noToken) && many.noToken[i] {
					res.Message = errTokenRequired.Error()
				}
				out.Results[i] = wire.FromResult(res, h.storeMessage(x, res.Status, res.Message))
			}
			if err != nil {
				out.Message = h.storeMessage(x, status, err.Error())
			}
			h.write(x, StatusCode(status), status, out)
		}})
}

// followQuery is a request of GET /v1/audit/follow.
type followQuery = audit.Query

// serveFollow streams the audit records that the query selects as they
// commit, as server-sent events: subscribed (once the starting point is
// known), a record event per record (data: the record, as in an audit
// page; resume after it with cursor=a1.ID), position when the stream has
// read past records the query does not select since the last record or
// position it sent (data: {"cursor"}: resume from it; at most one every
// positionEvery; at shutdown, the position not sent yet goes at once,
// before end), error when a read of the trail failed (the stream goes
// on), end when the server ends the stream (at shutdown, when its store
// closed: status closed, or when the cursor is behind a prune: status
// unavailable, the message beginning with audit.PrunedPrefix), and
// keep-alive comments. It starts after ?cursor=, or at the first record
// at or after ?since= (not both: 400), else at the end of the trail (changes from now on);
// ?op= and ?owner= filter as on GET /v1/audit.
func (h *Handler) serveFollow(x *exchange) {
	serve(h, x, route[followQuery]{op: protocol.OpGet, verb: "follow the audit trail", shape: errorShape,
		decode: func(x *exchange, _ []byte, _ string) (followQuery, string, error) {
			if x.unread {
				return audit.Query{}, "", errStreamBody
			}
			q, err := query(x.r)
			if err != nil {
				return audit.Query{}, "", err
			}
			if err := queryParams(q, "namespace", "key", "cursor", "since", "op", "owner"); err != nil {
				return audit.Query{}, "", err
			}
			if q.Get("since") != "" && q.Get("cursor") != "" {
				// Two starts: one would be dropped without a word.
				return audit.Query{}, "", errors.New("follow: since and cursor are two places to start: give one " +
					"(cursor to go on after a record or position, since to start at a time)")
			}
			out := audit.Query{Namespace: q.Get("namespace"), Key: q.Get("key"), Cursor: q.Get("cursor"), Follow: true,
				Ops: audit.ParseOps(q.Get("op")), Owner: q.Get("owner")}
			if s := q.Get("since"); s != "" {
				var err error
				if out.Since, err = parseSince(s); err != nil {
					return audit.Query{}, "", err
				}
			}
			return out, out.Namespace, out.Validate()
		},
		run: h.follow})
}

// follow finds where q's stream starts (under ctx, the request's
// deadline) and streams records until the client goes away, the server
// ends streams, or a reload no longer allows the caller.
func (h *Handler) follow(ctx context.Context, x *exchange, q audit.Query) {
	if h.audit == nil {
		h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable, "audit: this server has no audit reader", errorShape)
		return
	}
	select {
	case <-h.streamsClosed:
		h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable, "follow: the server is shutting down", errorShape)
		return
	default:
	}
	reload := h.reloads()
	if status, why := h.stillAllowed(x, protocol.OpGet, q.Namespace); status != "" {
		h.refusal(x, status, StatusCode(status), "follow: "+why, errorShape)
		return
	}
	done, ok := h.openStream(x, errorShape)
	if !ok {
		return
	}
	defer done()
	cfg := &audit.WatchConfig{ReadTimeout: h.defaultTimeout}
	start, err := audit.Start(ctx, h.audit, q, cfg)
	if err != nil {
		h.failure(ctx, x, err, errorShape)
		return
	}
	q.Cursor = start
	es := h.startEvents(x)
	if es.event(eventSubscribed, wire.NotifyEvent{Status: eventSubscribed, Message: "following the audit trail after cursor " +
		strconv.Quote(start), KeepAlive: h.keepAlive.String()}) != nil {
		return
	}
	sctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	items := make(chan followItem)
	wcfg := *cfg
	wcfg.Passed = func(cursor string) {
		select {
		case items <- followItem{passed: cursor}:
		case <-sctx.Done():
		}
	}
	go func() {
		defer close(items)
		for rec, err := range audit.Watch(sctx, h.audit, q, &wcfg) {
			select {
			case items <- followItem{rec: rec, err: err}:
			case <-sctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range items { // the watch ends with sctx
		}
	}()
	keepAlive := time.NewTicker(h.keepAlive)
	defer keepAlive.Stop()
	pos := newFollowPosition(start)
	defer pos.stop()
	end := func(status protocol.Status, msg string) {
		x.status = status
		_ = es.event(eventEnd, wire.NotifyEvent{Status: string(status), Message: msg, ErrorCode: x.errorCode})
	}
	for {
		var werr error
		select {
		case <-x.r.Context().Done():
			return
		case <-h.streamsClosed:
			// The position not told yet goes with the end, in its write
			// (shutdown waits for no more than that one write): the client
			// resumes from it on the next server.
			x.status = protocol.StatusUnavailable
			_ = es.write(pos.flush(items) + eventText(eventEnd, wire.NotifyEvent{Status: string(protocol.StatusUnavailable),
				Message: "the server is shutting down"}))
			return
		case <-reload:
			if status, why := h.stillAllowed(x, protocol.OpGet, q.Namespace); status != "" {
				end(status, why)
				return
			}
			reload = h.reloads()
			continue
		case <-keepAlive.C:
			werr = es.comment("keep-alive")
		case <-pos.due():
			cursor, ok := pos.take()
			if !ok {
				continue
			}
			werr = es.data(eventPosition, wire.FollowPosition{Cursor: cursor})
		case it, ok := <-items:
			switch {
			case !ok:
				return
			case it.passed != "":
				pos.passed(it.passed)
				continue
			case it.err != nil:
				status := failedStatus(x.r.Context(), it.err)
				x.errorCode = errorCodeOf(it.err)
				if status == protocol.StatusClosed || status == protocol.StatusInvalid || errors.Is(it.err, audit.ErrPruned) ||
					x.errorCode != "" {
					// A closed store answers nothing again, a store that
					// needs a restart refuses everything until then (the
					// watch ends on it), and a cursor behind a prune (or
					// past the end) stays there: end, as a notify stream
					// does, rather than report it forever.
					end(status, h.errorMessage(x, status, it.err))
					return
				}
				werr = es.event(eventError, wire.NotifyEvent{Status: string(status), Message: h.storeMessage(x, status, it.err.Error())})
			default:
				rec := wire.FromRecord(it.rec)
				rec.ExpiresAt = wire.OptTime(it.rec.ExpiresAt)
				werr = es.data(eventRecord, rec)
				pos.sent(it.rec.ID)
			}
		}
		if werr != nil {
			return // the client went away
		}
		keepAlive.Reset(h.keepAlive)
	}
}

// followItem is what a follow stream's watch hands the stream: a record,
// a failed read, or how far it has read (WatchConfig.Passed).
type followItem struct {
	rec    audit.Record
	err    error
	passed string // not a record: the cursor the watch reads on from
}

// followPosition keeps what a follow stream has told its client of where
// it reads on from, and the position it has yet to tell: one that the
// server's watch passed (past records the query does not select) beyond
// the last record or position sent. A position goes positionEvery after
// the previous one at the soonest, and not at all when a record past it
// went first. It is used by the stream's goroutine.
type followPosition struct {
	told    int64       // the id of the last record or position sent (the start's, at first)
	pending string      // a position past told, not sent yet; "" when none
	last    time.Time   // when the last position went
	timer   *time.Timer // fires when pending may go; armed while pending is set
}

func newFollowPosition(start string) *followPosition {
	p := &followPosition{timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	p.told, _ = audit.DecodeCursor(start) // "" (the start of the trail) is 0
	return p
}

// passed notes cursor, where the watch reads on from after a read.
func (p *followPosition) passed(cursor string) {
	id, err := audit.DecodeCursor(cursor)
	if err != nil || id <= p.told {
		return
	}
	if p.pending == "" {
		p.timer.Reset(max(positionEvery-time.Since(p.last), 0))
	}
	p.pending = cursor
}

// sent notes a record with id sent: a position up to it is told.
func (p *followPosition) sent(id int64) {
	p.told = max(p.told, id)
	if pid, _ := audit.DecodeCursor(p.pending); pid <= p.told {
		p.pending = ""
	}
}

// due fires when a position may be sent.
func (p *followPosition) due() <-chan time.Time { return p.timer.C }

// take returns the position to send now, if any, and counts it sent.
func (p *followPosition) take() (string, bool) {
	cursor := p.pending
	if cursor == "" {
		return "", false
	}
	p.pending, p.last = "", time.Now()
	p.told, _ = audit.DecodeCursor(cursor)
	return cursor, true
}

// flush notes the positions the watch is handing over on items, up to
// the first other item (a record not sent: no position past it may go),
// without waiting, and returns the text of the position event to send
// before the stream ends: "" when none is pending.
func (p *followPosition) flush(items <-chan followItem) string {
	for {
		select {
		case it, ok := <-items:
			if ok && it.passed != "" {
				p.passed(it.passed)
				continue
			}
		default:
		}
		break
	}
	cursor, ok := p.take()
	if !ok {
		return ""
	}
	return eventText(eventPosition, wire.FollowPosition{Cursor: cursor})
}

func (p *followPosition) stop() { p.timer.Stop() }
