package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// The client interprets transport failures and the server's answers here,
// in one place.

// transportError reports a request that got no answer: timeout when the
// caller's deadline passed or the caller gave up (or the network timed
// out), unavailable otherwise (refused, reset, DNS, TLS; a certificate the
// client does not trust says so), naming the base URL's host and port and
// that `leasectl serve` must run and listen there. The effect of a
// state change is unknown either way: retry with the same request id.
func (c *Client) transportError(ctx context.Context, op protocol.Op, err error) error {
	if err == nil {
		err = ctx.Err()
	}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		when := "before the deadline"
		if errors.Is(ctx.Err(), context.Canceled) {
			when = "before the caller gave up"
		}
		return backendkit.NewError(op, protocol.StatusTimeout, errors.Join(ctx.Err(), err), "httpapi: no answer from the server %s", when)
	case errors.As(err, &ne) && ne.Timeout():
		return backendkit.NewError(op, protocol.StatusTimeout, err, "httpapi: the connection to the server timed out")
	}
	if msg, ok := untrustedCertificate(err); ok {
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s", msg)
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: the server could not be reached at %s: "+
		"check the base URL's (leasectl's DSN's) host and port, and that the server (`leasectl serve`) runs and listens there", c.hostPort())
}

// hostPort returns the host and port of the base URL, the scheme's default
// port when it names none.
func (c *Client) hostPort() string {
	if c.base.Port() != "" {
		return c.base.Host
	}
	port := "80"
	if c.base.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(c.base.Hostname(), port)
}

// untrustedCertificate returns the message for err when the client
// refused the server's TLS certificate, naming how to trust a private CA
// when the certificate's CA is the one not trusted.
func untrustedCertificate(err error) (string, bool) {
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		return "", false
	}
	msg := "httpapi: the server's TLS certificate is not trusted"
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		msg += ": no CA this client trusts signed it (the system's, or those of the base URL's cacert when it has one). " +
			"To trust a private CA, name its certificate (PEM) in the https base URL, leasectl's DSN, as ?cacert=FILE; " +
			"or give it in SSL_CERT_FILE (Linux and other Unix systems; on macOS and Windows add it to the system's " +
			"trust store), or from Go in the RootCAs of the transport of ClientConfig.HTTPClient"
	}
	return msg, true
}

// ErrUnauthorized and ErrForbidden match the errors of requests the server
// refused for their bearer token, before they reached its store: none or
// an unknown one (HTTP 401, status unauthorized), or one whose role or
// namespaces do not allow the request (HTTP 403, status forbidden). Such an
// error has status unavailable in the protocol's vocabulary (the store was
// not reached) and a [*RefusedError] as its cause: a caller that retries
// on unavailable should stop on these, since a retry is refused again
// (leasectl exits 7). They also match [protocol.ErrUnauthenticated] and
// [protocol.ErrForbidden], which every backend's refusal of its
// credentials or their permission matches.
var (
	ErrUnauthorized = errors.New("httpapi: no bearer token, or one the server does not know (HTTP 401)")
	ErrForbidden    = errors.New("httpapi: the bearer token may not do that (HTTP 403)")
)

// ErrTooManyStreams matches the error of a stream (a notification
// subscription, an audit follow) that the server refused because the
// client's bearer token has as many streams open as the server allows one
// token (HTTP 429, status too_many_streams; leasectl serve
// --max-streams-per-token). Its status is unavailable: the store was not
// asked, and the stream may open once one of the token's others closed,
// so a follow reconnects and a waiter polls meanwhile. It is no refusal of
// the token (leasectl exits 5, not 7). The server's own cap of streams
// (--max-streams) is answered 503 unavailable, its message naming the flag.
var ErrTooManyStreams = errors.New("httpapi: the bearer token has as many streams open as the server allows one token (HTTP 429 too_many_streams)")

// RefusedError is the cause of an error of a request the server refused
// for its bearer token: Code 401 (Status unauthorized) or 403 (forbidden),
// with the server's message. It matches [ErrUnauthorized] or
// [ErrForbidden].
type RefusedError struct {
	Code    int
	Status  protocol.Status
	Message string
}

// Error says the server refused the request, with its HTTP code, status
// and message.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("the server refused the request (HTTP %d %s): %s", e.Code, e.Status, e.Message)
}

// Is reports whether target is the sentinel of e's status: ErrUnauthorized
// or [protocol.ErrUnauthenticated] for 401, ErrForbidden or
// [protocol.ErrForbidden] for 403.
func (e *RefusedError) Is(target error) bool {
	switch e.Status {
	case StatusUnauthorized:
		return target == ErrUnauthorized || target == protocol.ErrUnauthenticated
	case StatusForbidden:
		return target == ErrForbidden || target == protocol.ErrForbidden
	}
	return false
}

// answerError returns the error for an answer whose status means the store
// did not answer (timeout, unavailable, closed) or the server refused the
// request (401, 403; a stream past its token's cap, 429), and for an answer whose code does not go with its
// status (a proxy's, say). It returns nil for the store's answers: the
// success statuses and the refusals, invalid included, which a backend
// reports in its result. An unavailable answer with errorCode
// [ErrorCodeRestartRequired] is an error matching
// [protocol.ErrRestartRequired].
func answerError(op protocol.Op, code int, status protocol.Status, msg, errorCode string) error {
	switch {
	case refusedStatus(status):
		if code == StatusCode(status) {
			return backendkit.NewError(op, protocol.StatusUnavailable, &RefusedError{Code: code, Status: status, Message: msg}, "httpapi")
		}
	case status == StatusTooManyStreams:
		if code == StatusCode(status) {
			return backendkit.NewError(op, protocol.StatusUnavailable, ErrTooManyStreams, "server: %s", msg)
		}
	case !status.Known():
		return backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered HTTP %d with status %q, "+
			"which is not a lease status: %s", code, status, msg)
	}
	if code != StatusCode(status) {
		return backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered HTTP %d with status %q, "+
			"which go with HTTP %d: %s", code, status, StatusCode(status), msg)
	}
	switch status {
	case protocol.StatusTimeout:
		return backendkit.NewError(op, protocol.StatusTimeout, nil, "server: %s", msg)
	case protocol.StatusUnavailable:
		if err := prunedError(op, msg); err != nil {
			return err
		}
		if errorCode == ErrorCodeRestartRequired {
			return restartRequired(op, msg)
		}
		return backendkit.NewError(op, protocol.StatusUnavailable, nil, "server: %s", msg)
	case protocol.StatusClosed:
		return serverClosed(op, msg)
	}
	return nil
}

// serverClosed returns the error for the server's answer closed (msg its
// message), in a response or a stream's event: unavailable, for the
// server's store is closed, not this client, which answers again once the
// server (or another behind the same address) serves. Only the client's
// own Close answers closed (clientClosed).
func serverClosed(op protocol.Op, msg string) error {
	return backendkit.NewError(op, protocol.StatusUnavailable, nil, "server: its store is closed (shutting down?): %s", msg)
}

// restartRequired returns the error for the server's unavailable answer
// of error_code [ErrorCodeRestartRequired] (msg its message), in a
// response or a stream's event: it matches [protocol.ErrRestartRequired],
// which no retry mends.
func restartRequired(op protocol.Op, msg string) error {
	return &protocol.Error{Op: op, Status: protocol.StatusUnavailable, Message: "server: " + msg, Err: protocol.ErrRestartRequired}
}

// prunedError returns the error matching audit.ErrPruned that the server's
// unavailable answer msg reports (a cursor behind a prune, its message
// beginning with audit.PrunedPrefix), nil for any other.
func prunedError(op protocol.Op, msg string) error {
	if !strings.HasPrefix(msg, audit.PrunedPrefix) {
		return nil
	}
	return &protocol.Error{Op: op, Status: protocol.StatusUnavailable, Message: msg, Err: audit.ErrPruned}
}

// badAnswer reports a response that is not one of the API's bodies: an
// HTML error page of a proxy, say.
func badAnswer(op protocol.Op, code int, body []byte) error {
	snippet := string(body)
	if len(snippet) > 120 {
		snippet = snippet[:120] + "..."
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered HTTP %d without a lease API body: %q", code, snippet)
}

// malformedEvent reports an event of the audit follow stream (op
// opFollow) or of a notification stream (opNotify), named name, that the
// client cannot read: its data (quoted, cut as badAnswer cuts a body) is
// not the event's JSON, or does not parse (why). It is a protocol error: a
// server of another version, which would send the same event again after
// a reconnect, so the follow or the subscription ends with it. The error
// carries a [*malformedError], which [isMalformed] tells.
func malformedEvent(op protocol.Op, name string, data []byte, why error) error {
	snippet := string(data)
	if len(snippet) > 120 {
		snippet = snippet[:120] + "..."
	}
	stream, ends := "audit follow stream", "follow"
	if op == opNotify {
		stream, ends = "notification stream", "subscription"
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, &malformedError{why: why, notify: op == opNotify}, "httpapi: the server sent a %s event this client cannot read on the "+
		"%s (data %q), a protocol error that ends the %s: run client and server of one release", name, stream, snippet, ends)
}

// malformedError is the cause of a [malformedEvent] error: why the event
// does not parse.
type malformedError struct {
	why    error
	notify bool // of a notification stream
}

// Is makes a notification stream's malformed event match
// [protocol.ErrNoNotifier]: the server would send it again, so the
// subscription cannot be made (a waiter polls, [protocol.WatchLease]
// leaves the loss to the holder's renewals).
func (e *malformedError) Is(target error) bool { return e.notify && target == protocol.ErrNoNotifier }

func (e *malformedError) Error() string { return e.why.Error() }
func (e *malformedError) Unwrap() error { return e.why }

// isMalformed reports whether err is a [malformedEvent] error: a protocol
// error that reconnecting cannot mend.
func isMalformed(err error) bool {
	var m *malformedError
	return errors.As(err, &m)
}

// unmendable reports whether err, of opening a stream, is one that
// reconnecting cannot mend, since the server would answer it again: a
// protocol error ([isMalformed]), a refusal of the bearer token (401 or
// 403, a [*RefusedError]), or a served store that needs a restart
// ([protocol.ErrRestartRequired]).
func unmendable(err error) bool {
	var refused *RefusedError
	return isMalformed(err) || errors.As(err, &refused) || errors.Is(err, protocol.ErrRestartRequired)
}

// refusedStatus reports whether status, of a stream's end event, is a
// refusal of its bearer token (a reload removed it or narrowed its
// namespaces), which reconnecting cannot mend.
func refusedStatus(status protocol.Status) bool {
	return status == StatusUnauthorized || status == StatusForbidden
}

// clientClosed reports a call of a closed client: closed (DESIGN.md's
// status for a closed store: nothing was sent), so that a caller stops at
// once rather than retry, as a retry after unavailable would, a client
// that never answers again ([protocol.WatchLease] and the scheduler stop;
// a follow ends).
func clientClosed(op protocol.Op) error {
	return backendkit.NewError(op, protocol.StatusClosed, nil, "httpapi: the client was closed")
}

// notifyRefusal returns the error for a subscription the server answered
// with code other than 200: one matching [protocol.ErrNoNotifier] for a
// server whose store cannot signal (501) or that has no such route (404,
// an older server), so that the waiter polls; else the error of
// answerError, or invalid for a request the server found bad.
func notifyRefusal(code int, body []byte) error {
	if code == http.StatusNotImplemented || code == http.StatusNotFound {
		return fmt.Errorf("httpapi: the server does not stream signals of released keys (HTTP %d): %w", code, protocol.ErrNoNotifier)
	}
	var out wire.Error
	if err := json.Unmarshal(body, &out); err != nil || out.Status == "" {
		return badAnswer(opNotify, code, body)
	}
	status := protocol.Status(out.Status)
	if err := answerError(opNotify, code, status, out.Message, out.ErrorCode); err != nil {
		return err
	}
	return backendkit.NewError(opNotify, status, nil, "server: %s", out.Message)
}

// streamStart reads the first event of a notification stream or of the
// audit follow stream (op), named name with data: subscribed, announcing
// the server's keep-alive interval. It returns how long the stream may
// then stay silent before the client takes it for dead: two intervals and
// a second, for a loaded server or a buffering proxy.
//
// It tells two failures apart. A first event of another name says the
// stream is not live (yet): the error is worth a reconnection. A
// subscribed event the client cannot read (data that is not its JSON, a
// status other than subscribed, a keep_alive that is no positive
// duration) is a protocol error that the server would send again: the
// error is a [malformedEvent] one ([isMalformed]), which ends the follow
// or the subscription.
func streamStart(op protocol.Op, name string, data []byte) (time.Duration, error) {
	var ev wire.NotifyEvent
	if name != eventSubscribed {
		_ = json.Unmarshal(data, &ev) // for its status and message, when it has them
		return 0, backendkit.NewError(op, protocol.StatusUnavailable, nil,
			"httpapi: the server's stream began with event %q of status %q, not subscribed: %s", name, ev.Status, ev.Message)
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return 0, malformedEvent(op, name, data, err)
	}
	if ev.Status != eventSubscribed {
		return 0, malformedEvent(op, name, data, fmt.Errorf("status %q, not subscribed", ev.Status))
	}
	keepAlive, err := time.ParseDuration(ev.KeepAlive)
	if err != nil || keepAlive <= 0 {
		return 0, malformedEvent(op, name, data, fmt.Errorf("keep_alive %q is not a positive duration", ev.KeepAlive))
	}
	return 2*keepAlive + time.Second, nil
}
