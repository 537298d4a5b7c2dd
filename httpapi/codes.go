package httpapi

import (
	"errors"
	"net/http"

	"github.com/leasestore/leasestore/protocol"
)

// Statuses the HTTP API answers besides the protocol's vocabulary: the
// request carried no known bearer token (401), or its token may not do
// that operation in that namespace (403); neither reached the store. The
// served store cannot signal released keys, so GET /v1/notify/... has
// nothing to stream (501): wait by polling.
const (
	StatusUnauthorized   protocol.Status = "unauthorized"
	StatusForbidden      protocol.Status = "forbidden"
	StatusNotImplemented protocol.Status = "not_implemented"
)

// ErrorCodeRestartRequired is the error_code of an answer (503, status
// unavailable) or a stream's end event of a served store that refuses
// every operation until its process restarts: its error matched
// [protocol.ErrRestartRequired] (a SQLite file put back under it, an etcd
// cluster whose revision went back). No retry mends it, so the client's
// error matches protocol.ErrRestartRequired too: a follow ends on it, a
// holder reports its lease lost. Other answers carry no error_code.
const ErrorCodeRestartRequired = "restart_required"

// errorCodeOf is the error_code of an answer whose store call failed with
// err: [ErrorCodeRestartRequired] when err matches
// protocol.ErrRestartRequired, else none.
func errorCodeOf(err error) string {
	if errors.Is(err, protocol.ErrRestartRequired) {
		return ErrorCodeRestartRequired
	}
	return ""
}

// Header names the API reads.
const (
	// HeaderIdempotencyKey carries the request id, instead of or besides
	// the body's request_id (which must then be equal).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderTimeout carries the request's deadline as a Go duration
	// ("2.5s", "800ms"); the handler cuts it to its maximum.
	HeaderTimeout = "Request-Timeout"
)

// MaxBodyBytes bounds a request body; a longer one is answered 413.
const MaxBodyBytes = 64 << 10

// StatusCode returns the HTTP code that answers a body with status s, as
// DESIGN.md pins it: 200 for every success; 409 conflict, stale_token,
// not_owner; 410 expired; 404 not_found; 400 invalid; 401 unauthorized;
// 403 forbidden; 503 unavailable and closed; 504 timeout; and, for the
// notification route this repository adds, 501 not_implemented, and for
// a stream past its token's cap 429 too_many_streams. Any other status is
// 500.
func StatusCode(s protocol.Status) int {
	switch s {
	case protocol.StatusAcquired, protocol.StatusRenewed, protocol.StatusReleased, protocol.StatusRevoked, protocol.StatusFound:
		return http.StatusOK
	case protocol.StatusConflict, protocol.StatusStaleToken, protocol.StatusNotOwner:
		return http.StatusConflict
	case protocol.StatusExpired:
		return http.StatusGone
	case protocol.StatusNotFound:
		return http.StatusNotFound
	case protocol.StatusInvalid:
		return http.StatusBadRequest
	case StatusUnauthorized:
		return http.StatusUnauthorized
	case StatusForbidden:
		return http.StatusForbidden
	case protocol.StatusUnavailable, protocol.StatusClosed:
		return http.StatusServiceUnavailable
	case protocol.StatusTimeout:
		return http.StatusGatewayTimeout
	case StatusNotImplemented:
		return http.StatusNotImplemented
	case StatusTooManyStreams:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}
