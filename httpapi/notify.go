package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// The notification stream: GET /v1/notify/{namespace}/{key} subscribes to
// the served store's [protocol.Notifier] for one key and answers
// text/event-stream (server-sent events). Each event is a named event
// whose data is one [wire.NotifyEvent] JSON object:
//
//	event: subscribed   first: the subscription is live (data carries keep_alive)
//	event: signal       the lease at the key may have ended (a release or revoke)
//	event: end          last, when the server ends the stream (data: why)
//
// and, when nothing else was sent for [Config].KeepAlive, a comment line
// ": keep-alive". The stream lasts until the client goes away, the store
// closes (or can no longer signal), or [Handler.CloseStreams].
const (
	eventSubscribed = "subscribed"
	eventSignal     = "signal"
	eventEnd        = "end"
)

// NotifyPath returns the escaped path of the notification stream of k:
// /v1/notify/{namespace}/{key}, each part percent-encoded like
// [LeasePath].
func NotifyPath(k protocol.Key) string {
	return "/v1/notify/" + pathSegment(k.Namespace) + "/" + pathSegment(k.Name)
}

// CloseStreams ends every notification stream, each with an "end" event
// of status unavailable, and answers later subscriptions 503, so that an
// http.Server's Shutdown is not held up by streams that would otherwise
// last until their clients go away: register it with
// srv.RegisterOnShutdown(h.CloseStreams). The other routes are not
// affected. It is idempotent and safe for concurrent use.
func (h *Handler) CloseStreams() {
	h.closeStreams.Do(func() { close(h.streamsClosed) })
}

func (h *Handler) serveNotify(x *exchange, rest string) {
	// Subscribing is a reader's right, like get.
	serve(h, x, route[protocol.Key]{op: protocol.OpGet, verb: "subscribe to signals", shape: errorShape,
		decode: func(x *exchange, _ []byte, _ string) (protocol.Key, string, error) {
			ns, name, hasKey, err := splitLeasePath(rest)
			k := protocol.Key{Namespace: ns, Name: name}
			switch {
			case err != nil:
			case x.unread:
				err = errStreamBody
			case !hasKey:
				err = errors.New("path: want /v1/notify/{namespace}/{key}")
			case x.r.URL.RawQuery != "":
				err = errors.New("query: notify takes no parameters")
			default:
				err = k.Validate()
			}
			return k, ns, err
		},
		run: h.notify})
}

// errStreamBody refuses a request to a stream that announces a body. A
// stream reads none, and cannot close its HTTP/1 connection within
// refusedBodyGrace of its answer, as the other GET routes do when they
// leave a body unread, since its answer lasts; and while a body is left
// unread, Go's server does not watch the connection for the client going
// away. So the request is refused, at once (see [Handler.leaveBody]).
var errStreamBody = errors.New("body: a stream takes none: send the GET without a body")

// notify subscribes to key (under ctx, the request's deadline) and streams
// its signals until the client goes away, the store stops signalling, or
// CloseStreams.
func (h *Handler) notify(ctx context.Context, x *exchange, key protocol.Key) {
	select {
	case <-h.streamsClosed:
		h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable, "notify: the server is shutting down", errorShape)
		return
	default:
	}
	// A reload from here on ends the stream if it narrows the token; one
	// since the request was authorized is caught by the check below.
	reload := h.reloads()
	if status, why := h.stillAllowed(x, protocol.OpGet, key.Namespace); status != "" {
		h.refusal(x, status, StatusCode(status), "notify: "+why, errorShape)
		return
	}
	done, ok := h.openStream(x, errorShape)
	if !ok {
		return
	}
	defer done()
	n, ok := h.store.(protocol.Notifier)
	var ch <-chan struct{}
	var cancel func()
	var err error
	if ok {
		ch, cancel, err = n.Subscribe(ctx, key)
	}
	if !ok || errors.Is(err, protocol.ErrNoNotifier) {
		h.refusal(x, StatusNotImplemented, http.StatusNotImplemented,
			"notify: the served store does not signal released keys: wait by polling", errorShape)
		return
	}
	if err != nil {
		h.failure(ctx, x, err, errorShape)
		return
	}
	defer func() { cancel() }()

	es := h.startEvents(x)
	if es.event(eventSubscribed, wire.NotifyEvent{Status: eventSubscribed, Message: "subscribed to " + key.String(),
		KeepAlive: h.keepAlive.String()}) != nil {
		return
	}
	keepAlive := time.NewTicker(h.keepAlive)
	defer keepAlive.Stop()
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
			end(protocol.StatusUnavailable, "the server is shutting down")
			return
		case <-reload:
			if status, why := h.stillAllowed(x, protocol.OpGet, key.Namespace); status != "" {
				end(status, why)
				return
			}
			reload = h.reloads()
			continue
		case <-keepAlive.C:
			werr = es.comment("keep-alive")
		case <-ch:
			// A store signals its subscribers when it closes or its own
			// channel broke, too: subscribing again (cheap while this
			// subscription holds the key) tells whether it still can. The
			// new subscription is live before the signal goes out, and the
			// client acts on the signal after it arrived, so no release
			// falls between the two.
			sctx, scancel := context.WithTimeout(x.r.Context(), h.defaultTimeout)
			next, nextCancel, err := n.Subscribe(sctx, key)
			cancel()
			if err != nil {
				status := failedStatus(sctx, err)
				x.errorCode = errorCodeOf(err)
				scancel()
				end(status, "the store stopped signalling: "+h.storeMessage(x, status, err.Error()))
				return
			}
			scancel()
			ch, cancel = next, nextCancel
			werr = es.event(eventSignal, wire.NotifyEvent{Status: eventSignal, Message: "the lease at " + key.String() + " may have ended"})
		}
		if werr != nil {
			return // the client went away
		}
		keepAlive.Reset(h.keepAlive)
	}
}

// startEvents answers 200 with an event stream, whose first event the
// caller sends (subscribed).
func (h *Handler) startEvents(x *exchange) eventStream {
	hd := x.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	x.code = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	x.status = eventSubscribed
	return eventStream{w: x.w, rc: http.NewResponseController(x.w), timeout: h.writeTimeout}
}

// eventStream writes server-sent events, flushing each.
type eventStream struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration // each write's, see Config.WriteTimeout
}

// write writes one event's text and flushes it, or fails once the client
// read none of it for es.timeout.
func (es eventStream) write(text string) error {
	_ = es.rc.SetWriteDeadline(time.Now().Add(es.timeout))
	if _, err := io.WriteString(es.w, text); err != nil {
		return err
	}
	return es.rc.Flush()
}

// event writes one event named name with ev as its data.
func (es eventStream) event(name string, ev wire.NotifyEvent) error { return es.data(name, ev) }

// data writes one event named name with v, in JSON, as its data.
func (es eventStream) data(name string, v any) error {
	return es.write(eventText(name, v))
}

// eventText returns the text of one event named name with v, in JSON, as
// its data.
func eventText(name string, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		// Only unsupported types fail; an event is plain data.
		panic(fmt.Sprintf("httpapi: encode event: %v", err))
	}
	return "event: " + name + "\ndata: " + string(data) + "\n\n"
}

// comment writes a comment line, which clients ignore but see arrive.
func (es eventStream) comment(text string) error {
	return es.write(": " + text + "\n\n")
}
