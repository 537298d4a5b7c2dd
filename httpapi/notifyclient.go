package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// opNotify names a subscription in the client's errors.
const opNotify protocol.Op = "notify"

var _ protocol.CappedNotifier = (*Client)(nil)

// Reconnection of a broken notification stream: the pause before each try
// doubles from the minimum to the maximum, and starts again from the
// minimum once a stream lasted longer than the maximum.
const (
	reconnectMinBackoff = 50 * time.Millisecond
	reconnectMaxBackoff = 5 * time.Second
)

// maxEventLine bounds a line of a notification stream.
const maxEventLine = 64 << 10

// subscription is one [Client.Subscribe]: its stream, reconnected when it
// breaks, until cancel or the client's Close.
type subscription struct {
	c    *Client
	key  protocol.Key
	ch   chan struct{}
	ctx  context.Context // ends with the subscription
	stop context.CancelFunc
	done chan struct{} // closed when the subscription's goroutine ended
}

// Subscribe implements [protocol.Notifier] over the server's notification
// stream (GET /v1/notify/{namespace}/{key}). It returns once the server's
// first event said the subscription is live, so every release or revoke
// of key committed afterwards sends on ch; it gives up after ctx ends or
// [protocol.DefaultTimeout], whichever comes first. A server whose store
// cannot signal, or that has no such route (an older one), gives an error
// matching [protocol.ErrNoNotifier]: AcquireWait then polls.
//
// The stream is the client's until cancel (idempotent; it returns once
// the stream is closed) or [Client.Close]. When it breaks (the server
// ended it, the connection failed, or nothing arrived for twice the
// server's keep-alive interval and a second) ch is signalled, since a
// release may go unheard, and the client reconnects in the background,
// pausing 50ms doubling up to 5s between tries, and signals ch again once
// the stream is back. Close signals every subscription's ch.
//
// A subscribed event the client cannot read (a server of another release,
// which would send it again) is a protocol error: Subscribe fails with an
// error naming the event, and a reconnection that meets one ends the
// subscription: ch is signalled and then stays quiet, so the caller's
// fallback (a waiter's recheck, a holder's renewals) takes over. So does a
// refusal of the client's token, which reconnecting cannot mend either:
// Subscribe fails matching [ErrUnauthorized] or [ErrForbidden], and a
// stream that the server ends for its token (a reload removed it or
// narrowed its namespaces), or a reconnection answered 401 or 403, ends
// the subscription.
func (c *Client) Subscribe(ctx context.Context, key protocol.Key) (<-chan struct{}, func(), error) {
	s := &subscription{c: c, key: key, ch: make(chan struct{}, 1), done: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(context.Background())
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		s.stop()
		return nil, nil, clientClosed(opNotify)
	}
	if c.subs == nil {
		c.subs = make(map[*subscription]struct{})
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	st, err := s.open(ctx)
	if err != nil {
		s.stop()
		close(s.done)
		c.forget(s)
		return nil, nil, err
	}
	go s.run(st)
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			s.stop()
			<-s.done
			c.forget(s)
		})
	}, nil
}

// SubscriptionsCapped implements [protocol.CappedNotifier]: true, since
// each subscription is a stream of the server, which bounds the streams
// open at once ([Config].MaxStreams, MaxStreamsPerToken). A scheduler
// over the client therefore does not listen for busy targets' release
// (released targets wait for a round), leaving the streams to watches of
// leases, which hear a revoke through them.
func (c *Client) SubscriptionsCapped() bool { return true }

// forget removes s from the client's subscriptions.
func (c *Client) forget(s *subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subs, s)
}

// closeSubscriptions ends every subscription and waits, within ctx, for
// their goroutines to end.
func (c *Client) closeSubscriptions(ctx context.Context) error {
	c.mu.Lock()
	subs := c.subs
	c.subs = nil
	c.mu.Unlock()
	for s := range subs {
		s.stop()
	}
	for s := range subs {
		select {
		case <-s.done:
		case <-ctx.Done():
			return backendkit.NewError(protocol.OpClose, protocol.StatusTimeout, ctx.Err(), "httpapi: close: notification streams were still ending")
		}
	}
	return nil
}

// signal wakes the subscriber without blocking.
func (s *subscription) signal() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// run follows st, and reconnects each time the stream breaks, until the
// subscription ends, the server ends the stream refusing its token, or a
// reconnection meets what reconnecting cannot mend (a subscribed event
// the client cannot read, a 401 or 403); it signals at each break, each
// reconnection, and the end.
func (s *subscription) run(st *stream) {
	defer close(s.done)
	defer s.signal()
	backoff := reconnectMinBackoff
	for {
		opened := time.Now()
		end := st.follow(s.signal)
		st.close()
		if s.ctx.Err() != nil || refusedStatus(end) {
			return
		}
		s.signal() // a release may go unheard until the stream is back
		if time.Since(opened) > reconnectMaxBackoff {
			backoff = reconnectMinBackoff
		}
		for st = nil; st == nil; {
			pause := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				pause.Stop()
				return
			case <-pause.C:
			}
			backoff = min(2*backoff, reconnectMaxBackoff)
			var err error
			if st, err = s.open(s.ctx); unmendable(err) {
				// A server of another protocol, which would send the
				// event again, or one that refuses the token (401,
				// 403), which it would refuse again: the subscription
				// ends (signalled), and the subscriber's fallback (a
				// waiter's recheck, a holder's renewals) takes over,
				// and hears the refusal itself.
				return
			}
		}
		s.signal() // releases while it was down went unheard
	}
}

// open subscribes: it sends the request and reads the first event, within
// ctx and protocol.DefaultTimeout. The stream it returns lasts until
// closed or the subscription ends.
func (s *subscription) open(ctx context.Context) (*stream, error) {
	octx, ocancel := context.WithTimeout(ctx, protocol.DefaultTimeout)
	defer ocancel()
	sctx, scancel := context.WithCancel(s.ctx)
	// Until the first event, the opening's deadline ends the stream too.
	stopOpening := context.AfterFunc(octx, scancel)
	st, err := s.c.openStream(sctx, octx, s.key)
	if !stopOpening() && err == nil {
		st.close()
		err = s.c.transportError(octx, opNotify, nil)
	}
	if err != nil {
		scancel()
		if s.ctx.Err() != nil {
			return nil, clientClosed(opNotify)
		}
		return nil, err
	}
	st.cancel = scancel
	st.silence = time.AfterFunc(st.window, scancel)
	return st, nil
}

// openStream sends the subscription of key under ctx (the stream's
// lifetime) and reads the server's first event; octx is the opening's
// deadline, which its errors are judged by.
func (c *Client) openStream(ctx, octx context.Context, key protocol.Key) (*stream, error) {
	deadline, _ := octx.Deadline()
	req, err := c.newRequest(ctx, http.MethodGet, c.url(NotifyPath(key), nil), nil, "text/event-stream", deadline)
	if err != nil {
		return nil, c.transportError(octx, opNotify, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(octx, opNotify, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEventLine))
		if err != nil {
			return nil, c.transportError(octx, opNotify, err)
		}
		return nil, notifyRefusal(resp.StatusCode, body)
	}
	st := newStream(resp.Body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		_ = resp.Body.Close()
		return nil, badAnswer(opNotify, resp.StatusCode, []byte(resp.Header.Get("Content-Type")))
	}
	name, data, err := st.next()
	if err != nil {
		_ = resp.Body.Close()
		return nil, c.transportError(octx, opNotify, err)
	}
	if st.window, err = streamStart(opNotify, name, data); err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	return st, nil
}

// stream is one notification stream being read.
type stream struct {
	body    io.ReadCloser
	lines   *bufio.Scanner
	cancel  context.CancelFunc // ends the request
	window  time.Duration      // how long the stream may stay silent
	silence *time.Timer        // cancels the request when the stream stayed silent for window
}

// newStream reads the events of body.
func newStream(body io.ReadCloser) *stream {
	st := &stream{body: body, lines: bufio.NewScanner(body)}
	st.lines.Buffer(make([]byte, 0, 512), maxEventLine)
	return st
}

// next reads the next event, skipping comments, and returns its name and
// data; every line read counts as a sign of life.
func (st *stream) next() (name string, data []byte, err error) {
	var lines []string
	for st.lines.Scan() {
		if st.silence != nil {
			st.silence.Reset(st.window)
		}
		line := strings.TrimSuffix(st.lines.Text(), "\r")
		switch {
		case line == "":
			if name == "" && lines == nil {
				continue
			}
			return name, []byte(strings.Join(lines, "\n")), nil
		case strings.HasPrefix(line, ":"): // a comment: keep-alive
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "data":
				lines = append(lines, value)
			}
		}
	}
	if err := st.lines.Err(); err != nil {
		return "", nil, err
	}
	return "", nil, io.ErrUnexpectedEOF
}

// follow reads events, calling signal for each signal event, until the
// stream breaks or the server ends it; it returns the status of the end
// event ("" when the stream broke, or for an end it cannot read).
func (st *stream) follow(signal func()) protocol.Status {
	for {
		name, data, err := st.next()
		switch {
		case err != nil:
			return ""
		case name == eventEnd:
			var ev wire.NotifyEvent
			_ = json.Unmarshal(data, &ev)
			return protocol.Status(ev.Status)
		case name == eventSignal:
			signal()
		}
	}
}

// close ends the request and lets go of the connection.
func (st *stream) close() {
	if st.silence != nil {
		st.silence.Stop()
	}
	if st.cancel != nil {
		st.cancel()
	}
	_ = st.body.Close()
}
