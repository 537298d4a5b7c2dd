package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/listcursor"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// DefaultMaxTimeout is the longest deadline a request may ask for unless
// [Config].MaxTimeout says otherwise.
const DefaultMaxTimeout = 30 * time.Second

// Config tunes a [Handler]. A nil *Config means all defaults.
type Config struct {
	// DefaultTimeout is the deadline of a request without a Request-Timeout
	// header. Default: [protocol.DefaultTimeout] (5s).
	DefaultTimeout time.Duration
	// MaxTimeout bounds the deadline a request may ask for; longer ones are
	// cut to it (also one past what a time.Duration holds, such as
	// 200000d). Default: [DefaultMaxTimeout] (30s).
	MaxTimeout time.Duration
	// Logger receives one access record per request (method, path, route,
	// code, status, request id, duration, remote address, role; never a
	// token). Default: [slog.Default].
	Logger *slog.Logger
	// Tokens returns the bearer tokens in force, read on every request (so
	// a reload takes effect at once). Nil, or a nil *Tokens, means no
	// authentication: every request may do everything. Default: nil.
	Tokens func() *Tokens
	// Registry is where the handler registers its HTTP metrics and what
	// /metrics serves; register the store's observer there too
	// (promobserver.New(registry)). Default: a registry of the handler's own.
	Registry *prometheus.Registry
	// KeepAlive is how often a notification stream (GET /v1/notify/...)
	// that has nothing else to send sends a keep-alive comment, so that
	// proxies keep it open and the client can tell a live stream from a
	// dead one. Default: [DefaultKeepAlive] (15s).
	KeepAlive time.Duration
	// BodyTimeout bounds the time from a request's arrival until its body
	// has been read: a client that sends its body slower (or not at all)
	// is answered 408 and its connection closed, whether or not its token
	// is good. Bind the headers' time with the http.Server's
	// ReadHeaderTimeout (leasectl serve: 10s). Default: [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// MaxStreams bounds the streams (notify and audit follow) open at
	// once on the handler; one more is answered 503. Default:
	// [DefaultMaxStreams]; negative: no bound.
	MaxStreams int
	// MaxStreamsPerToken bounds the streams open at once with one bearer
	// token (with Tokens); one more is answered 429, status
	// too_many_streams. Default: [DefaultMaxStreamsPerToken]; negative: no
	// bound.
	MaxStreamsPerToken int
	// WriteTimeout bounds each write to a client: an answer, or one event
	// or keep-alive of a stream (notify, audit follow). A client that
	// reads none of it for that long is cut off: its connection closes,
	// and its stream ends and frees its slot (a stream otherwise outlives
	// the reload that removed its token while its client does not read).
	// Default: [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// LoopbackOnly answers only requests addressed (Host) to a loopback
	// name: localhost (or a name under it), 127.0.0.0/8 or ::1; others
	// are answered 403. A server without tokens on loopback sets it:
	// through DNS rebinding any web page could otherwise reach it under
	// a name of the page's own. Default: false.
	LoopbackOnly bool
}

// Defaults of [Config]'s limits.
const (
	DefaultBodyTimeout        = 10 * time.Second
	DefaultMaxStreams         = 4096
	DefaultMaxStreamsPerToken = 1024
	DefaultWriteTimeout       = 10 * time.Second
)

// DefaultKeepAlive is the default of [Config].KeepAlive.
const DefaultKeepAlive = 15 * time.Second

// Handler is the HTTP API over a store. It borrows the store and the audit
// reader: it never closes them (close the store after the http.Server's
// Shutdown returned, so that requests in flight finish). Notification
// streams last until their client goes away, so an http.Server's Shutdown
// would wait for them: register [Handler.CloseStreams] with the server's
// RegisterOnShutdown. It is safe for concurrent use.
type Handler struct {
	store          protocol.Store
	audit          audit.Reader
	log            *slog.Logger
	tokens         func() *Tokens
	defaultTimeout time.Duration
	maxTimeout     time.Duration
	keepAlive      time.Duration
	metrics        *httpMetrics
	gatherer       prometheus.Gatherer
	bodyTimeout    time.Duration
	writeTimeout   time.Duration
	loopbackOnly   bool
	origins        *http.CrossOriginProtection
	streams        streamLimits
	streamsClosed  chan struct{} // closed by CloseStreams
	closeStreams   sync.Once

	reloadMu sync.Mutex
	reloaded chan struct{} // closed and replaced by TokensReloaded
}

// NewHandler returns a handler serving store, and the audit trail through
// reader (nil: /v1/audit answers 503). cfg may be nil. It fails only when
// the registry refuses the handler's metrics (another handler registered
// there already).
func NewHandler(store protocol.Store, reader audit.Reader, cfg *Config) (*Handler, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	h := &Handler{
		store: store, audit: reader, log: cfg.Logger, tokens: cfg.Tokens,
		defaultTimeout: cfg.DefaultTimeout, maxTimeout: cfg.MaxTimeout, keepAlive: cfg.KeepAlive,
		bodyTimeout: cfg.BodyTimeout, writeTimeout: cfg.WriteTimeout, loopbackOnly: cfg.LoopbackOnly,
		origins: http.NewCrossOriginProtection(), streamsClosed: make(chan struct{}), reloaded: make(chan struct{}),
		streams: newStreamLimits(cfg.MaxStreams, cfg.MaxStreamsPerToken),
	}
	if h.bodyTimeout <= 0 {
		h.bodyTimeout = DefaultBodyTimeout
	}
	if h.keepAlive <= 0 {
		h.keepAlive = DefaultKeepAlive
	}
	if h.writeTimeout <= 0 {
		h.writeTimeout = DefaultWriteTimeout
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.maxTimeout <= 0 {
		h.maxTimeout = DefaultMaxTimeout
	}
	if h.defaultTimeout <= 0 {
		h.defaultTimeout = protocol.DefaultTimeout
	}
	h.defaultTimeout = min(h.defaultTimeout, h.maxTimeout)
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	h.metrics, h.gatherer = m, reg
	return h, nil
}

// Route names, the route label of the metrics and the access log.
const (
	routeAcquire = "acquire"
	routeRenew   = "renew"
	routeRelease = "release"
	routeRevoke  = "revoke"
	routeGet     = "get"
	routeList    = "list"
	routeAudit   = "audit"
	routeNotify  = "notify"
	routeSpaces  = "namespaces"
	routeMany    = "renew-many"
	routeFollow  = "audit-follow"
	routeHealthz = "healthz"
	routeReadyz  = "readyz"
	routeMetrics = "metrics"
	routeOpenAPI = "openapi"
	routeUnknown = "unknown"
)

// exchange is one request being answered: what the access log and the
// metrics report about it.
type exchange struct {
	w         http.ResponseWriter
	r         *http.Request
	path      string // the escaped path routed on (see escapedPath)
	route     string
	code      int
	status    protocol.Status
	requestID string
	role      string
	token     string     // the bearer token, to check a stream's again at reload; never logged
	principal *Principal // the token's principal; nil without tokens
	// unread is set while a request body may be left unread: an answer
	// then closes an HTTP/1 connection instead of reading the rest.
	unread bool
	// bodyDeadline is when the body must have arrived (with unread).
	bodyDeadline time.Time
	// errorCode is the answer's error_code (errorCodeOf the store's
	// error), "" for none.
	errorCode string
}

// ServeHTTP implements [http.Handler]. Paths are routed on their escaped
// form, without cleaning, so a key may hold any character (a slash, a dot
// segment, a percent sign escaped as %25).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x := &exchange{w: w, r: r, path: escapedPath(r), route: routeUnknown}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// The body, if any, must arrive within the body timeout, read or
		// not; readBody lifts the deadline once it has it all.
		x.unread, x.bodyDeadline = true, start.Add(h.bodyTimeout)
		_ = http.NewResponseController(w).SetReadDeadline(x.bodyDeadline)
	}
	h.metrics.inFlight.Inc()
	defer func() {
		h.metrics.inFlight.Dec()
		elapsed := time.Since(start)
		h.metrics.observe(x.route, r.Method, x.code, elapsed)
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", x.path), slog.String("route", x.route),
			slog.Int("code", x.code), slog.String("status", string(x.status)), slog.String("request_id", x.requestID),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000), slog.String("remote", r.RemoteAddr),
			slog.String("proto", r.Proto),
		}
		if x.role != "" {
			attrs = append(attrs, slog.String("role", x.role))
		}
		h.log.LogAttrs(r.Context(), slog.LevelInfo, "http request", attrs...)
	}()
	h.route(x)
}

// admit answers 403, in the route's shape sh, and returns false for what
// no route answers: a browser's cross-origin write (by its Sec-Fetch-Site or Origin header: a
// page of another site posting to the API, say with a form), and, with
// Config.LoopbackOnly, a request addressed to a name that is not loopback.
// Clients other than browsers send neither header and are not refused.
func (h *Handler) admit(x *exchange, sh shape) bool {
	msg := ""
	switch {
	case h.origins.Check(x.r) != nil:
		msg = "a browser's cross-origin request that changes state is refused (Sec-Fetch-Site or Origin names another site)"
	case h.loopbackOnly && !loopbackHost(x.r.Host):
		msg = fmt.Sprintf("Host %q is not a loopback name: a server without bearer tokens answers only requests "+
			"addressed to localhost, 127.0.0.1 or ::1, so that no web page reaches it by DNS rebinding; "+
			"serve with --tokens FILE to answer other names", x.r.Host)
	default:
		return true
	}
	h.refusal(x, StatusForbidden, http.StatusForbidden, msg, sh)
	return false
}

// loopbackHost reports whether a request's Host (a name or address, and
// maybe a port) is localhost, a name under it, or a loopback address, or
// is missing (an HTTP/1.0 health checker's: a browser always sends one).
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// escapedPath returns r's path as the client escaped it, to be split
// before it is unescaped (a %2F is a slash inside a namespace or key):
// r.URL.RawPath, else the request target (r.RequestURI up to '?'),
// whichever names the same path as r.URL.Path. EscapedPath will not do:
// it drops a RawPath that is not a valid encoding (a character sent
// unescaped, as raw UTF-8, beside a %2F) and re-escapes the decoded path,
// where that %2F became a slash. A request whose URL a wrapper rewrote (a
// proxy that strips a prefix) without RawPath is routed on r.URL.
func escapedPath(r *http.Request) string {
	target, _, _ := strings.Cut(r.RequestURI, "?")
	if !strings.HasPrefix(target, "/") {
		// The absolute form (http://host/path) of a request to a proxy.
		if _, rest, ok := strings.Cut(target, "://"); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				target = rest[i:]
			}
		}
	}
	for _, raw := range []string{r.URL.RawPath, target} {
		if strings.HasPrefix(raw, "/") {
			if p, err := url.PathUnescape(raw); err == nil && p == r.URL.Path {
				return raw
			}
		}
	}
	return r.URL.EscapedPath()
}

// route dispatches x by method and escaped path (x.path).
func (h *Handler) route(x *exchange) {
	path := x.path
	method := x.r.Method
	only := func(route string, sh shape, allowed string, fn func(*exchange)) {
		x.route = route
		if !h.admit(x, sh) {
			return
		}
		if method != allowed {
			h.methodNotAllowed(x, allowed)
			return
		}
		fn(x)
	}
	post := func(route string, sh shape, fn func(*exchange)) { only(route, sh, http.MethodPost, fn) }
	get := func(route string, sh shape, fn func(*exchange)) {
		x.route = route
		if !h.admit(x, sh) {
			return
		}
		if method != http.MethodGet && method != http.MethodHead {
			h.methodNotAllowed(x, http.MethodGet+", "+http.MethodHead)
			return
		}
		fn(x)
	}
	switch {
	case path == "/v1/acquire":
		post(routeAcquire, resultShape, h.serveAcquire)
	case path == "/v1/renew":
		post(routeRenew, resultShape, h.serveRenew)
	case path == "/v1/release":
		post(routeRelease, resultShape, h.serveRelease)
	case path == "/v1/revoke":
		post(routeRevoke, resultShape, h.serveRevoke)
	case strings.HasPrefix(path, "/v1/leases/"):
		rest := strings.TrimPrefix(path, "/v1/leases/")
		if strings.Contains(rest, "/") {
			get(routeGet, resultShape, func(x *exchange) { h.serveGet(x, rest) })
		} else {
			get(routeList, listShape, func(x *exchange) { h.serveList(x, rest) })
		}
	case path == "/v1/audit":
		get(routeAudit, auditShape, h.serveAudit)
	case path == "/v1/audit/follow":
		only(routeFollow, errorShape, http.MethodGet, h.serveFollow)
	case path == "/v1/namespaces":
		get(routeSpaces, namespaceShape, h.serveNamespaces)
	case path == "/v1/renew-many":
		post(routeMany, renewManyShape, h.serveRenewMany)
	case strings.HasPrefix(path, "/v1/notify/"):
		// GET only: a HEAD would hold a stream open with nothing to carry it.
		only(routeNotify, errorShape, http.MethodGet, func(x *exchange) { h.serveNotify(x, strings.TrimPrefix(path, "/v1/notify/")) })
	case path == "/healthz":
		get(routeHealthz, errorShape, h.serveHealthz)
	case path == "/readyz":
		get(routeReadyz, errorShape, h.serveReadyz)
	case path == "/metrics":
		get(routeMetrics, errorShape, h.serveMetrics)
	case path == "/openapi.json":
		get(routeOpenAPI, errorShape, h.serveOpenAPI)
	default:
		if !h.admit(x, errorShape) {
			return
		}
		h.write(x, http.StatusNotFound, protocol.StatusInvalid,
			wire.Error{Status: string(protocol.StatusInvalid), Message: fmt.Sprintf("no route %s %s: see /openapi.json", method, path)})
	}
}

func (h *Handler) methodNotAllowed(x *exchange, allow string) {
	x.w.Header().Set("Allow", allow)
	h.write(x, http.StatusMethodNotAllowed, protocol.StatusInvalid, wire.Error{Status: string(protocol.StatusInvalid),
		Message: fmt.Sprintf("method %s: %s takes %s", x.r.Method, x.path, allow)})
}

// refusedBodyGrace is how long an HTTP/1 connection whose request was
// answered before its body was read stays open to read what of the body
// is on its way. A client that sent its whole body at once sees its
// answer and the connection close without delay; closing with the body
// unread would answer it with a TCP reset, which may discard the answer
// before the client reads it.
const refusedBodyGrace = 500 * time.Millisecond

// write sends v as the JSON body with code; status is for the access log
// (the body's status; for the probes "ok" or "healthy").
func (h *Handler) write(x *exchange, code int, status protocol.Status, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unsupported types fail; every body here is plain data.
		panic(fmt.Sprintf("httpapi: encode body: %v", err))
	}
	x.code, x.status = code, status
	h.leaveBody(x)
	hd := x.w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	h.writeDeadline(x)
	x.w.WriteHeader(code)
	if x.r.Method != http.MethodHead {
		_, _ = x.w.Write(buf.Bytes())
	}
}

// leaveBody readies an answer to x sent with its body unread: Go's server
// reads up to 256 KiB of an unread body, for as long as the client takes:
// before answering, unless the answer says Connection: close, and after
// the handler returns (closing the body) in any case, until the read
// deadline. The answer goes now, the connection closes, and the deadline
// comes refusedBodyGrace from now. (HTTP/2 resets the stream instead.)
// Every answer but a stream's is sent after it.
func (h *Handler) leaveBody(x *exchange) {
	if !x.unread || x.r.ProtoMajor != 1 {
		return
	}
	x.w.Header().Set("Connection", "close")
	if d := time.Now().Add(refusedBodyGrace); d.Before(x.bodyDeadline) {
		_ = http.NewResponseController(x.w).SetReadDeadline(d)
	}
}

// writeDeadline gives the answer to x [Config.WriteTimeout] to be taken by
// the client, which is cut off after it; every answer but a stream's (see
// eventStream) is written after it. The server clears the deadline once
// the answer is flushed.
func (h *Handler) writeDeadline(x *exchange) {
	_ = http.NewResponseController(x.w).SetWriteDeadline(time.Now().Add(h.writeTimeout))
}

// refusal answers, in the route's own shape, a request that never reached
// the store or whose store call failed (failure), with the request id it
// gave when that was read by then (body or Idempotency-Key): a client
// retries a timeout with it.
func (h *Handler) refusal(x *exchange, status protocol.Status, code int, msg string, sh shape) {
	h.write(x, code, status, sh(status, msg, x.requestID, x.errorCode))
}

// failure answers a store call that failed with err under ctx, with the
// status [failedStatus] gives it, in the route's shape.
func (h *Handler) failure(ctx context.Context, x *exchange, err error, sh shape) {
	status := failedStatus(ctx, err)
	x.errorCode = errorCodeOf(err)
	h.refusal(x, status, StatusCode(status), h.errorMessage(x, status, err), sh)
}

// errorMessage is storeMessage of err's text, except for an audit read
// whose cursor is behind a prune (audit.ErrPruned): its message, which
// names the cursor, ids and the way on and nothing of the store's
// connection, is what the caller must read, and begins with
// audit.PrunedPrefix so that the client tells it apart.
func (h *Handler) errorMessage(x *exchange, status protocol.Status, err error) string {
	if msg, ok := prunedMessage(err); ok && status == protocol.StatusUnavailable {
		return msg
	}
	return h.storeMessage(x, status, err.Error())
}

// prunedMessage returns the message of the error in err's chain that
// matches audit.ErrPruned (see audit.CheckPruned).
func prunedMessage(err error) (string, bool) {
	if !errors.Is(err, audit.ErrPruned) {
		return "", false
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if pe, ok := e.(*protocol.Error); ok && strings.HasPrefix(pe.Message, audit.PrunedPrefix) {
			return pe.Message, true
		}
	}
	return "", false
}

// storeMessage returns what a caller may read of a store's answer of
// status with message msg. The statuses of a store that did not answer
// (unavailable, timeout, closed) carry the driver's words, which name the
// database's user, name and address: those are logged, with the request's
// route and id, and the caller reads a fixed sentence instead (one saying
// that the server must be restarted when x.errorCode says so).
func (h *Handler) storeMessage(x *exchange, status protocol.Status, msg string) string {
	var safe string
	switch {
	case status == protocol.StatusUnavailable && x.errorCode == ErrorCodeRestartRequired:
		safe = "the store refuses every operation until the server is restarted (no retry mends it); the server's log has the cause"
	case status == protocol.StatusUnavailable:
		safe = "the store is unavailable; the server's log has the cause"
	case status == protocol.StatusTimeout:
		safe = "the deadline passed before the store answered; the effect is unknown: retry with the same request id to learn it"
	case status == protocol.StatusClosed:
		safe = "the store is closed (the server is shutting down)"
	default:
		return msg
	}
	h.log.LogAttrs(x.r.Context(), slog.LevelWarn, "http: the store failed", slog.String("route", x.route),
		slog.String("request_id", x.requestID), slog.String("status", string(status)), slog.String("err", msg))
	return safe
}

// authenticate checks the bearer token, when the handler has tokens. It
// answers 401 and returns false for a missing or unknown token.
func (h *Handler) authenticate(x *exchange, sh shape) (*Principal, bool) {
	var tokens *Tokens
	if h.tokens != nil {
		tokens = h.tokens()
	}
	if tokens == nil {
		return nil, true
	}
	// One Authorization header: with two, the server would take the first
	// while a proxy in front may check or log the last.
	auth, err := oneHeader(x.r, "Authorization")
	if err != nil {
		x.w.Header().Set("WWW-Authenticate", `Bearer realm="leasestore"`)
		h.refusal(x, StatusUnauthorized, http.StatusUnauthorized, err.Error(), sh)
		return nil, false
	}
	scheme, token, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		token = ""
	}
	p, ok := tokens.authenticate(strings.TrimSpace(token))
	if !ok {
		x.w.Header().Set("WWW-Authenticate", `Bearer realm="leasestore"`)
		msg := "no bearer token: send Authorization: Bearer TOKEN"
		if auth != "" {
			msg = "unknown bearer token"
		}
		h.refusal(x, StatusUnauthorized, http.StatusUnauthorized, msg, sh)
		return nil, false
	}
	x.role, x.token, x.principal = p.Role.String(), strings.TrimSpace(token), &p
	return &p, true
}

// authorize answers 403 and returns false when p may not run op in
// namespace. verb says what the request does, for the message ("" for op
// itself).
func (h *Handler) authorize(x *exchange, p *Principal, op protocol.Op, verb, namespace string, sh shape) bool {
	if p == nil || p.allows(op, namespace) {
		return true
	}
	what := fmt.Sprintf("namespace %q", namespace)
	if namespace == "" {
		what = "every namespace at once (a token needs the glob * for that)"
	}
	if verb == "" {
		verb = string(op)
	}
	msg := fmt.Sprintf("a %s token may not %s in %s", p.Role, verb, what)
	if p.Role < opRole(op) {
		msg = fmt.Sprintf("a %s token may not %s: that takes %s", p.Role, verb, opRole(op))
	}
	h.refusal(x, StatusForbidden, http.StatusForbidden, msg, sh)
	return false
}

// maxDrainedBody is how much of an unread body Go's server reads after
// the handler returned, before it closes the connection.
const maxDrainedBody = 256 << 10

// readBody reads the request body, answering 413 past MaxBodyBytes and
// 408 when it did not arrive within the body timeout.
func (h *Handler) readBody(x *exchange, limit int64, sh shape) ([]byte, bool) {
	if x.r.ContentLength > limit && (x.r.Header.Get("Expect") != "" || x.r.ContentLength > limit+maxDrainedBody) {
		// Declared too large: refused before a byte is read (and before
		// an Expect: 100-continue is answered), not after the body
		// timeout spent waiting for a body that would be refused. A body
		// on its way that the server drains after answering (up to
		// maxDrainedBody past the limit) is read to the limit first, as
		// any: answered before the client sent it, the connection's close
		// could reach the client as a reset that discards the answer
		// (TestServeHTTPAPIPostgres's 70,000-byte request id, now and then).
		h.refusal(x, protocol.StatusInvalid, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("body: Content-Length %d is larger than the limit of %d bytes", x.r.ContentLength, limit), sh)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(x.w, x.r.Body, limit))
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		h.refusal(x, protocol.StatusInvalid, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("body: larger than the limit of %d bytes", limit), sh)
		return nil, false
	case errors.As(err, &ne) && ne.Timeout():
		h.refusal(x, protocol.StatusInvalid, http.StatusRequestTimeout,
			fmt.Sprintf("body: not received within %s of the request", durations.Format(h.bodyTimeout)), sh)
		return nil, false
	case err != nil:
		// The error names the connection's addresses: say what failed.
		h.refusal(x, protocol.StatusInvalid, http.StatusBadRequest, "body: the connection failed while it was read", sh)
		return nil, false
	}
	x.unread = false
	_ = http.NewResponseController(x.w).SetReadDeadline(time.Time{})
	return body, true
}

// jsonContentType refuses a body whose Content-Type names a media type
// other than application/json (a form, as curl -d and an HTML form send;
// text/plain): the route reads its body as JSON, and a sender that named
// another type did not write JSON, or a proxy may handle it as that type.
// A body without a Content-Type is read as JSON, as hand-written clients
// send it. JSON is UTF-8 (RFC 8259), and the body is read so: a charset
// parameter naming another (iso-8859-1, utf-16) is refused, since its
// bytes would be read as other characters than its sender wrote.
func jsonContentType(r *http.Request) error {
	v, err := oneHeader(r, "Content-Type")
	if err != nil || v == "" {
		return err
	}
	if mt, params, err := mime.ParseMediaType(v); err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return fmt.Errorf("body: Content-Type %q names the charset %s, but JSON is UTF-8: send the body in UTF-8, "+
				"as application/json or application/json; charset=utf-8", v, cs)
		}
		return nil
	}
	return fmt.Errorf("body: Content-Type %q is not JSON: send the JSON body with Content-Type: application/json "+
		"(curl: -H 'Content-Type: application/json'), or without a Content-Type", v)
}

// opContext returns the request's context bounded by its deadline: the
// Request-Timeout header, else the default, cut to the maximum (also a
// header past what a time.Duration holds).
func (h *Handler) opContext(x *exchange) (context.Context, context.CancelFunc, error) {
	d := h.defaultTimeout
	v, err := oneHeader(x.r, HeaderTimeout)
	if err != nil {
		return nil, nil, err
	}
	if v != "" {
		t, err := durations.Parse(v)
		if errors.Is(err, durations.ErrTooLong) && !strings.HasPrefix(v, "-") && strings.TrimSpace(v) == v {
			// Past what a duration holds: longer than any maximum, so
			// cut to it as a long one is.
			t, err = h.maxTimeout, nil
		}
		if err != nil || t <= 0 {
			return nil, nil, fmt.Errorf("%s: %q is not a positive duration such as \"5s\" or \"800ms\"", HeaderTimeout, v)
		}
		d = min(t, h.maxTimeout)
	}
	ctx, cancel := context.WithTimeout(x.r.Context(), d)
	return ctx, cancel, nil
}

// oneHeader returns the value of r's header name ("" when absent), or an
// error when r gives it more than once: the server would read the first
// while a proxy may log the last.
func oneHeader(r *http.Request, name string) (string, error) {
	vs := r.Header.Values(name)
	if len(vs) > 1 {
		return "", fmt.Errorf("%s: given %d times: send it once", name, len(vs))
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// shape makes a route's body for an answer that did not come from the
// store: its status, message, request id ("" when unknown; only the
// result shape carries one) and error_code ("" for none).
type shape func(s protocol.Status, msg, requestID, errorCode string) any

func resultShape(s protocol.Status, msg, requestID, errorCode string) any {
	return wire.Result{Status: string(s), RequestID: requestID, Message: msg, ErrorCode: errorCode}
}
func listShape(s protocol.Status, msg, _, errorCode string) any {
	return wire.ListPage{Status: string(s), Leases: []wire.Lease{}, Message: msg, ErrorCode: errorCode}
}
func auditShape(s protocol.Status, msg, _, errorCode string) any {
	return wire.AuditPage{Status: string(s), Records: []wire.Record{}, Message: msg, ErrorCode: errorCode}
}
func errorShape(s protocol.Status, msg, _, errorCode string) any {
	return wire.Error{Status: string(s), Message: msg, ErrorCode: errorCode}
}

// route is one lease route: the operation a token must be allowed (for
// its namespace), the body shape of its refusals, how it reads its request
// from the exchange (body is nil for GET routes; idem is the
// Idempotency-Key header) and names the request's namespace, and how it
// runs the request and answers.
type route[Req any] struct {
	op   protocol.Op
	verb string // what the request does, in 403 messages; "" for op
	// anyNamespace: the route spans namespaces and its run filters or
	// checks them (x.principal); serve checks only the role.
	anyNamespace bool
	// nsRequired: the store refuses an empty namespace (400 invalid), so
	// serve checks only the role for one: it is no request for every
	// namespace, which only the glob * may make (an audit read's "").
	nsRequired bool
	maxBody    int64 // the body's limit; 0 for MaxBodyBytes
	shape      shape
	decode     func(x *exchange, body []byte, idem string) (req Req, namespace string, err error)
	run        func(ctx context.Context, x *exchange, req Req)
}

// serve is the path every lease route takes: authenticate; for POST,
// refuse a role that may never run the operation before reading the
// body, then read it; decode; authorize for the request's namespace (an
// empty one of a change for the role only: the store refuses it 400, for
// every token alike); run under the request's deadline.
func serve[Req any](h *Handler, x *exchange, rt route[Req]) {
	p, ok := h.authenticate(x, rt.shape)
	if !ok {
		return
	}
	var body []byte
	if x.r.Method == http.MethodPost {
		if p != nil && p.Role < opRole(rt.op) {
			h.authorize(x, p, rt.op, rt.verb, "", rt.shape) // refused for the role, before the body is read
			return
		}
		if err := jsonContentType(x.r); err != nil {
			h.refusal(x, protocol.StatusInvalid, http.StatusUnsupportedMediaType, err.Error(), rt.shape) // nothing read
			return
		}
		if body, ok = h.readBody(x, cmp.Or(rt.maxBody, MaxBodyBytes), rt.shape); !ok {
			return
		}
	}
	idem, err := oneHeader(x.r, HeaderIdempotencyKey)
	x.requestID = idem
	var req Req
	var ns string
	if err == nil {
		req, ns, err = rt.decode(x, body, idem)
	}
	if err != nil {
		h.write(x, http.StatusBadRequest, protocol.StatusInvalid, rt.shape(protocol.StatusInvalid, err.Error(), x.requestID, ""))
		return
	}
	if rt.anyNamespace || (rt.nsRequired && ns == "") {
		if p != nil && p.Role < opRole(rt.op) {
			h.authorize(x, p, rt.op, rt.verb, "", rt.shape)
			return
		}
	} else if !h.authorize(x, p, rt.op, rt.verb, ns, rt.shape) {
		return
	}
	ctx, cancel, err := h.opContext(x)
	if err != nil {
		h.write(x, http.StatusBadRequest, protocol.StatusInvalid, rt.shape(protocol.StatusInvalid, err.Error(), x.requestID, ""))
		return
	}
	defer cancel()
	rt.run(ctx, x, req)
}

// change is the route of a POST operation: decode reads its JSON body,
// and returns the request id it read there with its error, if it got so
// far, so that a refusal carries it; ident gives a request's key and id.
func change[Req any](h *Handler, x *exchange, op protocol.Op, decode func([]byte, string) (Req, error),
	ident func(Req) (protocol.Key, string), run func(context.Context, Req) (protocol.Result, error)) {
	serve(h, x, route[Req]{op: op, shape: resultShape, nsRequired: true,
		decode: func(x *exchange, body []byte, idem string) (Req, string, error) {
			req, err := decode(body, idem)
			if err == nil {
				err = noQuery(x, op)
			}
			key, id := ident(req)
			x.requestID = cmp.Or(id, x.requestID)
			return req, key.Namespace, err
		},
		run: func(ctx context.Context, x *exchange, req Req) {
			res, err := run(ctx, req)
			h.answer(x, res, err)
		}})
}

// noQuery refuses a query string on a POST route, which reads its
// parameters from the JSON body only: a client that wrote ?ttl=1h or
// ?request_id=... believes it sent them, and the request would run
// without them.
func noQuery(x *exchange, op protocol.Op) error {
	if x.r.URL.RawQuery != "" {
		return fmt.Errorf("query: %s takes no query parameters: send them in the JSON body", op)
	}
	return nil
}

// answer sends a lease operation's result, and the error_code of its
// error err (nil for a success).
func (h *Handler) answer(x *exchange, res protocol.Result, err error) {
	x.requestID, x.errorCode = res.RequestID, errorCodeOf(err)
	out := wire.FromResult(res, h.storeMessage(x, res.Status, res.Message))
	out.ErrorCode = x.errorCode
	h.write(x, StatusCode(res.Status), res.Status, out)
}

func (h *Handler) serveAcquire(x *exchange) {
	change(h, x, protocol.OpAcquire, decodeAcquire, func(r protocol.AcquireRequest) (protocol.Key, string) { return r.Key, r.RequestID },
		h.store.Acquire)
}

func (h *Handler) serveRenew(x *exchange) {
	change(h, x, protocol.OpRenew, decodeRenew, func(r protocol.RenewRequest) (protocol.Key, string) { return r.Key, r.RequestID },
		h.store.Renew)
}

func (h *Handler) serveRelease(x *exchange) {
	change(h, x, protocol.OpRelease, decodeRelease, func(r protocol.ReleaseRequest) (protocol.Key, string) { return r.Key, r.RequestID },
		h.store.Release)
}

func (h *Handler) serveRevoke(x *exchange) {
	change(h, x, protocol.OpRevoke, decodeRevoke, func(r protocol.RevokeRequest) (protocol.Key, string) { return r.Key, r.RequestID },
		h.store.Revoke)
}

func (h *Handler) serveGet(x *exchange, rest string) {
	serve(h, x, route[protocol.GetRequest]{op: protocol.OpGet, shape: resultShape,
		decode: func(x *exchange, _ []byte, idem string) (protocol.GetRequest, string, error) {
			ns, key, _, err := splitLeasePath(rest)
			if err == nil && x.r.URL.RawQuery != "" {
				err = errors.New("query: get takes no parameters")
			}
			return protocol.GetRequest{Key: protocol.Key{Namespace: ns, Name: key}, RequestID: idem}, ns, err
		},
		run: func(ctx context.Context, x *exchange, req protocol.GetRequest) {
			res, err := h.store.Get(ctx, req)
			h.answer(x, res, err)
		}})
}

func (h *Handler) serveList(x *exchange, rest string) {
	serve(h, x, route[protocol.ListRequest]{op: protocol.OpList, shape: listShape,
		decode: func(x *exchange, _ []byte, idem string) (protocol.ListRequest, string, error) {
			ns, _, _, err := splitLeasePath(rest)
			if err != nil {
				return protocol.ListRequest{}, ns, err
			}
			q, err := query(x.r)
			if err != nil {
				return protocol.ListRequest{}, ns, err
			}
			req, err := decodeList(ns, q, idem)
			return req, ns, err
		},
		run: func(ctx context.Context, x *exchange, req protocol.ListRequest) {
			res, err := h.store.List(ctx, req)
			x.requestID, x.errorCode = res.RequestID, errorCodeOf(err)
			if err != nil || res.Status != protocol.StatusFound {
				h.refusal(x, res.Status, StatusCode(res.Status), h.storeMessage(x, res.Status, res.Message), listShape)
				return
			}
			// The store's cursor names the last lease; the answer's names
			// this list too, so that another list refuses it.
			if res.NextCursor, err = listcursor.Bind(res.NextCursor, listScope(req), protocol.MaxNameLen); err != nil {
				h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable,
					h.storeMessage(x, protocol.StatusUnavailable, "list: the store answered a cursor that does not decode: "+err.Error()), listShape)
				return
			}
			h.write(x, http.StatusOK, res.Status, wire.FromList(res))
		}})
}

func (h *Handler) serveAudit(x *exchange) {
	// Reading the trail is a reader's right, like get and list.
	serve(h, x, route[audit.Query]{op: protocol.OpGet, verb: "read the audit trail", shape: auditShape,
		decode: func(x *exchange, _ []byte, _ string) (audit.Query, string, error) {
			raw, err := query(x.r)
			if err != nil {
				return audit.Query{}, "", err
			}
			q, err := decodeAudit(raw)
			return q, q.Namespace, err
		},
		run: func(ctx context.Context, x *exchange, q audit.Query) {
			if h.audit == nil {
				h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable, "audit: this server has no audit reader", auditShape)
				return
			}
			page, err := h.audit.ReadAudit(ctx, q)
			if err != nil {
				h.failure(ctx, x, err, auditShape)
				return
			}
			out := wire.AuditPage{Status: string(protocol.StatusFound), Records: make([]wire.Record, 0, len(page.Records)),
				NextCursor: page.NextCursor, HeldBack: page.HeldBack, FollowCursor: page.FollowCursor}
			for _, r := range page.Records {
				rec := wire.FromRecord(r)
				rec.ExpiresAt = wire.OptTime(r.ExpiresAt)
				out.Records = append(out.Records, rec)
			}
			h.write(x, http.StatusOK, protocol.StatusFound, out)
		}})
}

// failedStatus is the status of a store call that failed with err: its
// status, timeout when ctx ended, unavailable for anything outside the
// vocabulary's failures.
func failedStatus(ctx context.Context, err error) protocol.Status {
	status := protocol.StatusOf(err)
	if ctx.Err() != nil {
		status = protocol.StatusTimeout
	}
	if status.Success() || !status.Known() {
		status = protocol.StatusUnavailable
	}
	return status
}

func (h *Handler) serveHealthz(x *exchange) {
	h.write(x, http.StatusOK, "ok", wire.Error{Status: "ok", Message: "the process is alive"})
}

func (h *Handler) serveReadyz(x *exchange) {
	ctx, cancel, err := h.opContext(x)
	if err != nil {
		h.refusal(x, protocol.StatusInvalid, http.StatusBadRequest, err.Error(), errorShape)
		return
	}
	defer cancel()
	if err := h.store.Health(ctx); err != nil {
		h.failure(ctx, x, err, errorShape)
		return
	}
	h.write(x, http.StatusOK, "healthy", wire.Error{Status: "healthy", Message: "the store answered"})
}

func (h *Handler) serveMetrics(x *exchange) {
	x.code = http.StatusOK
	h.leaveBody(x)
	h.writeDeadline(x)
	promhttp.HandlerFor(h.gatherer, promhttp.HandlerOpts{}).ServeHTTP(x.w, x.r)
}

func (h *Handler) serveOpenAPI(x *exchange) {
	x.code = http.StatusOK
	hd := x.w.Header()
	hd.Set("Content-Type", "application/json")
	h.leaveBody(x)
	h.writeDeadline(x)
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method != http.MethodHead {
		_, _ = x.w.Write(openAPIDocument)
	}
}
