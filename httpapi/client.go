package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// ClientConfig tunes a [Client]. A nil *ClientConfig means all defaults.
type ClientConfig struct {
	// Token is the bearer token sent with every request, without the
	// whitespace around it (a token read with its line's newline, from an
	// env file or a secret: no token of a tokens file holds whitespace).
	// One that still holds a control character is refused by NewClient
	// (matching protocol.ErrUnauthenticated). Default: none.
	Token string
	// HTTPClient sends the requests; the Client borrows it and never closes
	// it. Default: a client of the Client's own, with a pooled transport
	// (HTTP/2 over TLS, a connection that goes quiet pinged so that a dead
	// one is closed within seconds) whose idle connections Close closes,
	// trusting the CAs of the base URL's cacert parameter when it has one
	// (which is refused beside an HTTPClient: put the CA in its
	// transport's RootCAs). A transport given here should set
	// http.Transport.HTTP2's SendPingTimeout for the same end.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of one operation when the server could
	// not be reached or the connection broke before an answer; each retry
	// sends the same request id, so a change is never made twice. The
	// deadline bounds them too; a server certificate the client refused is
	// not tried again. Default: 3.
	MaxAttempts int
}

// maxResponseBytes bounds a response body the client reads: an audit page
// of audit.MaxLimit records with the longest fields fits.
const maxResponseBytes = 32 << 20

// Client is a [protocol.Backend] and an [audit.Reader] over the HTTP API of
// a [Handler] (leasectl serve): wrap it in protocol.New for a Store over
// HTTP. The server judges expiry by its store's clock, keeps request ids
// and fences tokens; the client only carries requests. A timeout or a
// broken transport is reported as timeout or unavailable (retry with the
// same request id to learn the outcome); a 401 or 403 as unavailable (the
// server refused service). It is a [protocol.Notifier] too, over the
// server's notification stream ([Client.Subscribe]), so that a blocking
// acquire over HTTP is woken by the release. A Client is safe for
// concurrent use.
type Client struct {
	base     *url.URL
	hc       *http.Client
	owned    *http.Transport // the transport the client made, closed by Close; nil when borrowed
	token    string
	attempts int
	closed   atomic.Bool

	mu      sync.Mutex
	subs    map[*subscription]struct{} // the live subscriptions, ended by Close
	follows map[*followStream]struct{} // the open follow streams, cut by Close
}

// followStream is an open follow stream of the client: cancel cuts it.
type followStream struct{ cancel context.CancelFunc }

// openFollow notes a follow stream that cancel cuts, for Close; false
// when Close has begun (then the stream must not be opened).
func (c *Client) openFollow(cancel context.CancelFunc) (*followStream, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, false
	}
	f := &followStream{cancel: cancel}
	if c.follows == nil {
		c.follows = make(map[*followStream]struct{})
	}
	c.follows[f] = struct{}{}
	return f, true
}

// closeFollow forgets a follow stream that ended.
func (c *Client) closeFollow(f *followStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.follows, f)
}

// cutFollows cuts every open follow stream (Close).
func (c *Client) cutFollows() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for f := range c.follows {
		f.cancel()
	}
	c.follows = nil
}

var (
	_ protocol.Backend = (*Client)(nil)
	_ audit.Reader     = (*Client)(nil)
)

// NewClient returns a client of the API at baseURL (http://HOST:PORT or
// https://HOST:PORT, optionally with a path prefix), leasectl's DSN of a
// served store. cfg may be nil. No connection is made until the first
// operation.
//
// An https base URL may name the CAs to trust for the server's
// certificate, instead of the system's, in its one parameter
// cacert=FILE (a PEM file of one or more CA certificates, as etcdctl's
// --cacert and an etcds:// DSN's cacert): a server whose certificate a
// private CA signed. NewClient reads the file; one that cannot be read or
// holds no certificate is refused, naming the parameter, before anything
// is sent. So is a token (ClientConfig.Token) that cannot be sent in a
// header.
func NewClient(baseURL string, cfg *ClientConfig) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, errors.New("httpapi: base URL: malformed")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("httpapi: base URL: scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("httpapi: base URL: want http(s)://HOST:PORT[/PREFIX][?cacert=FILE], without user or fragment")
	}
	if cfg == nil {
		cfg = &ClientConfig{}
	}
	roots, err := baseCAs(u, cfg)
	if err != nil {
		return nil, err
	}
	u.RawQuery, u.ForceQuery = "", false
	// The prefix is kept as it was typed, its escapes included (a proxy's
	// "/lease%20store", a %2F inside a segment, beside characters typed
	// unescaped, which url.Parse's RawPath would drop), and url appends
	// escaped paths to it.
	typed, _, _ := strings.Cut(baseURL, "?")
	u.RawPath = strings.TrimSuffix(typedPath(typed), "/")
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, errors.New("httpapi: base URL: malformed path")
	}
	token := strings.TrimSpace(cfg.Token)
	if i := strings.IndexFunc(token, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		// Never sent (net/http refuses the header), so never an outage:
		// a bad token. Its text is not quoted.
		return nil, fmt.Errorf("httpapi: token: a control character at byte %d of %d, which no bearer token holds: %w",
			i+1, len(token), protocol.ErrUnauthenticated)
	}
	c := &Client{base: u, hc: cfg.HTTPClient, token: token, attempts: cfg.MaxAttempts}
	if c.attempts <= 0 {
		c.attempts = 3
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		t.MaxIdleConns = 256
		// HTTP/2 sends every request over one connection: one that went
		// dead without closing (a server host gone, a route dropped) would
		// take each renewal sent after, and so the leases, with it. A ping
		// after a quiet spell finds it dead and closes it; the requests on
		// it fail (the client retries them) and the next go over a new one.
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: http2PingAfter, PingTimeout: http2PingTimeout}
		if roots != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: roots}
		}
		c.owned = t
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// An HTTP/2 connection of the client's own transport from which nothing
// came for http2PingAfter is pinged, and closed when no answer comes
// within http2PingTimeout: a dead one is found within their sum.
const (
	http2PingAfter   = 2 * time.Second
	http2PingTimeout = 2 * time.Second
)

// ParamCACert is the parameter of an https base URL that names the PEM
// file of the CAs to trust for the server's certificate (see [NewClient]).
const ParamCACert = "cacert"

// baseCAs reads the query of the base URL u (for a client configured by
// cfg): nil for none, else the CAs of its cacert parameter, its only one.
// Every way it cannot serve is an error naming the parameter.
func baseCAs(u *url.URL, cfg *ClientConfig) (*x509.CertPool, error) {
	if u.RawQuery == "" {
		return nil, nil
	}
	const want = "the one parameter is cacert=FILE, the PEM file of a private CA's certificate (https only)"
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("httpapi: base URL: query does not parse (%v): %s, its value escaped as a URL query's", err, want)
	}
	for name := range q {
		if name != ParamCACert {
			return nil, fmt.Errorf("httpapi: base URL: unknown parameter %q: %s", name, want)
		}
	}
	files := q[ParamCACert]
	switch {
	case len(files) > 1:
		return nil, errors.New("httpapi: base URL: cacert given twice: give it once (the file may hold several CA certificates)")
	case files[0] == "":
		return nil, errors.New("httpapi: base URL: cacert is empty: name the PEM file of the CA's certificate")
	case u.Scheme != "https":
		return nil, errors.New("httpapi: base URL: cacert names the CA of the server's TLS certificate, which only https:// has: write https://")
	case cfg.HTTPClient != nil:
		return nil, errors.New("httpapi: base URL: cacert beside ClientConfig.HTTPClient, whose transport the client borrows " +
			"and does not change: put the CA in that transport's TLSClientConfig.RootCAs, or give no HTTPClient")
	}
	file := files[0]
	pem, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named below
		}
		return nil, fmt.Errorf("httpapi: base URL: cacert=%s: %w: name a readable PEM file of the CA's certificate", file, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("httpapi: base URL: cacert=%s holds no PEM certificate (-----BEGIN CERTIFICATE-----): "+
			"name the file of the CA's certificate, not a key", file)
	}
	return roots, nil
}

// Name implements [protocol.Backend]: "http".
func (c *Client) Name() string { return "http" }

// Close ends the client's notification streams (signalling their
// subscribers), waiting within ctx for them to end, cuts its follow
// streams (each follow then ends with closed), and closes the idle
// connections of the client's own transport. It does not affect the
// server or its store. From the moment Close begins, every call of the
// client answers closed without sending anything.
func (c *Client) Close(ctx context.Context) error {
	c.closed.Store(true)
	c.cutFollows()
	err := c.closeSubscriptions(ctx)
	if c.owned != nil {
		c.owned.CloseIdleConnections()
	}
	return err
}

// call is one HTTP exchange: the status code and the raw body.
type call struct {
	method    string
	path      string // escaped, after the base path
	query     url.Values
	body      any // JSON-encoded when not nil
	requestID string
}

// do sends c and returns the answer's code and body, retrying transport
// failures with the same request (and so the same request id). A change
// (POST) whose retry is refused for its token (401, 403) fails as
// unavailable without matching the refusal: the attempt whose answer was
// lost may have taken effect, so its outcome is unknown.
func (c *Client) do(ctx context.Context, op protocol.Op, cl call) (int, []byte, error) {
	if c.closed.Load() {
		return 0, nil, clientClosed(op)
	}
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return 0, nil, backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: encode request")
		}
	}
	target := c.url(cl.path, cl.query)
	var lastErr error
	for attempt := 1; attempt <= c.attempts; attempt++ {
		if attempt > 1 {
			pause := time.Duration(attempt*attempt) * 20 * time.Millisecond
			select {
			case <-ctx.Done():
				return 0, nil, c.transportError(ctx, op, lastErr)
			case <-time.After(pause):
			}
		}
		code, body, err := c.once(ctx, cl, target, payload)
		if err == nil && attempt > 1 && cl.method == http.MethodPost && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
			// The refusal of a retry says nothing of the attempt before it,
			// whose answer was lost: it may have taken effect.
			again := "retry it with the same request ids"
			if cl.requestID != "" {
				again = "retry with the same request id " + cl.requestID
			}
			return 0, nil, backendkit.NewError(op, protocol.StatusUnavailable, lastErr,
				"httpapi: the answer to the request was lost and its retry was refused (HTTP %d: the token was withdrawn or "+
					"limited meanwhile), so whether the request took effect is unknown: %s once the token may do it", code, again)
		}
		if err == nil {
			return code, body, nil
		}
		lastErr = err
		if _, refused := untrustedCertificate(err); refused || ctx.Err() != nil {
			break // a certificate refused once is refused on every retry
		}
	}
	return 0, nil, c.transportError(ctx, op, lastErr)
}

// typedPath returns the path of baseURL (a URL with a host and no query
// or fragment) as typed, with its escapes, each byte that a path may not
// hold as it is (a space, a non-ASCII character's bytes) escaped.
func typedPath(baseURL string) string {
	rest := baseURL[strings.Index(baseURL, "://")+3:]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return ""
	}
	var b strings.Builder
	for _, c := range []byte(rest[i:]) {
		if c == '%' || c == '/' || strings.IndexByte(pathSafe, c) >= 0 ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// pathSafe are the bytes besides letters, digits, '/' and '%' that a path
// holds as they are (RFC 3986 pchar).
const pathSafe = "-._~!$&'()*+,;=:@"

// url returns the URL of path (escaped, after the base path) with query.
func (c *Client) url(path string, query url.Values) *url.URL {
	target := *c.base
	target.RawPath = c.base.EscapedPath() + path
	target.Path, _ = url.PathUnescape(target.RawPath)
	target.RawQuery = query.Encode()
	return &target
}

// newRequest makes a request of target under ctx, with the client's
// token, accepting accept. deadline is the caller's (the zero time for
// none): the server's deadline is the caller's, so that the server stops
// when the caller stops waiting.
func (c *Client) newRequest(ctx context.Context, method string, target *url.URL, payload []byte, accept string,
	deadline time.Time) (*http.Request, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// Rounded up to the millisecond: a deadline already passed is left to
	// the transport to report. Rounding does not add to the time left, which
	// saturates for a deadline past what a time.Duration reaches (about 292
	// years), where it overflowed to a negative Request-Timeout; nor does
	// the header pass that reach, which the server would parse as too long.
	if left := time.Until(deadline); !deadline.IsZero() && left > 0 {
		ms := int64(left / time.Millisecond)
		if left%time.Millisecond != 0 && ms < math.MaxInt64/int64(time.Millisecond) {
			ms++
		}
		req.Header.Set(HeaderTimeout, strconv.FormatInt(ms, 10)+"ms")
	}
	return req, nil
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, cl call, target *url.URL, payload []byte) (int, []byte, error) {
	deadline, _ := ctx.Deadline()
	req, err := c.newRequest(ctx, cl.method, target, payload, "application/json", deadline)
	if err != nil {
		return 0, nil, err
	}
	if cl.requestID != "" {
		req.Header.Set(HeaderIdempotencyKey, cl.requestID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxResponseBytes {
		return 0, nil, fmt.Errorf("response body larger than %d bytes", maxResponseBytes)
	}
	return resp.StatusCode, body, nil
}

// result runs a lease operation on key whose answer is a result object.
func (c *Client) result(ctx context.Context, op protocol.Op, key protocol.Key, cl call) (protocol.Result, error) {
	code, body, err := c.do(ctx, op, cl)
	if err != nil {
		return protocol.Result{}, err
	}
	var out wire.Result
	absent, err := wire.Decode(body, &out)
	if err != nil || out.Status == "" {
		return protocol.Result{}, badAnswer(op, code, body)
	}
	if err := answerError(op, code, protocol.Status(out.Status), out.Message, out.ErrorCode); err != nil {
		return protocol.Result{}, err
	}
	if absent != nil {
		return protocol.Result{}, backendkit.NewError(op, protocol.StatusUnavailable, absent, "httpapi: the server's answer does not parse")
	}
	res, err := out.Protocol(op)
	if err != nil {
		return protocol.Result{}, backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: the server's answer does not parse")
	}
	if res.Lease != nil && res.Lease.Key != key {
		// Another lease's holder and token taken for key's would mislead
		// the caller (and a fencing token is per key).
		return protocol.Result{}, backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered about "+
			"the lease at %s, not %s: something in front of it rewrote the request's path (check the proxy, and the client's base URL)",
			res.Lease.Key, key)
	}
	return res, nil
}

// Acquire implements [protocol.Backend]. A namespace default of the
// client's runtime (r.DefaultLockDelay) is sent as the request's
// lock_delay, the only one the API carries: to the server it is one the
// client asked for. Without one the server's default applies.
func (c *Client) Acquire(ctx context.Context, r protocol.AcquireRequest) (protocol.Result, error) {
	delay := r.LockDelay
	if delay == 0 {
		delay = r.DefaultLockDelay
	}
	return c.result(ctx, protocol.OpAcquire, r.Key, call{method: http.MethodPost, path: "/v1/acquire", requestID: r.RequestID,
		body: acquireBody{Namespace: r.Key.Namespace, Key: r.Key.Name, Owner: r.Owner, TTL: r.TTL.String(), RequestID: r.RequestID,
			LockDelay: wire.OptDuration(delay)}})
}

// Renew implements [protocol.Backend].
func (c *Client) Renew(ctx context.Context, r protocol.RenewRequest) (protocol.Result, error) {
	return c.result(ctx, protocol.OpRenew, r.Key, call{method: http.MethodPost, path: "/v1/renew", requestID: r.RequestID, body: renewalOf(r)})
}

// renewalOf is the body of a renewal, alone (POST /v1/renew) or in a batch.
func renewalOf(r protocol.RenewRequest) renewBody {
	return renewBody{Namespace: r.Key.Namespace, Key: r.Key.Name, Owner: r.Owner, Token: r.Token, TTL: ttlField(r.TTL), RequestID: r.RequestID}
}

// ttlField is a renewal's ttl field: omitted for 0, which keeps the
// lease's own TTL.
func ttlField(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// Release implements [protocol.Backend].
func (c *Client) Release(ctx context.Context, r protocol.ReleaseRequest) (protocol.Result, error) {
	return c.result(ctx, protocol.OpRelease, r.Key, call{method: http.MethodPost, path: "/v1/release", requestID: r.RequestID,
		body: releaseBody{Namespace: r.Key.Namespace, Key: r.Key.Name, Owner: r.Owner, Token: r.Token, RequestID: r.RequestID}})
}

// Revoke implements [protocol.Backend].
func (c *Client) Revoke(ctx context.Context, r protocol.RevokeRequest) (protocol.Result, error) {
	return c.result(ctx, protocol.OpRevoke, r.Key, call{method: http.MethodPost, path: "/v1/revoke", requestID: r.RequestID,
		body: revokeBody{Namespace: r.Key.Namespace, Key: r.Key.Name, Actor: r.Actor, Reason: r.Reason, Token: r.Token, RequestID: r.RequestID}})
}

// LeasePath returns the escaped path of the lease at k:
// /v1/leases/{namespace}/{key}, each part percent-encoded (a slash in
// either as %2F, a part that is exactly "." or ".." as %2E or %2E%2E).
func LeasePath(k protocol.Key) string {
	return "/v1/leases/" + pathSegment(k.Namespace) + "/" + pathSegment(k.Name)
}

// pathSegment percent-encodes s as one segment of a path: as
// url.PathEscape does (a slash as %2F), and a segment that is exactly "."
// or ".." as %2E or %2E%2E, which the server reads back as "." or "..".
// Written literally, those are dot segments, which an RFC 3986 client
// (curl, browsers, url.URL.ResolveReference, Python's urllib3) removes
// before sending: the key ./x would be asked as GET /v1/leases/x, a list
// of another namespace.
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// Get implements [protocol.Backend].
func (c *Client) Get(ctx context.Context, r protocol.GetRequest) (protocol.Result, error) {
	return c.result(ctx, protocol.OpGet, r.Key, call{method: http.MethodGet, path: LeasePath(r.Key), requestID: r.RequestID})
}

// List implements [protocol.Backend].
func (c *Client) List(ctx context.Context, r protocol.ListRequest) (protocol.ListResult, error) {
	const op = protocol.OpList
	q := url.Values{}
	set := func(name, v string) {
		if v != "" {
			q.Set(name, v)
		}
	}
	set("prefix", r.Prefix)
	set("owner", r.Owner)
	if r.IncludeExpired {
		q.Set("include_expired", "true")
	}
	if r.Limit != 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	set("cursor", r.Cursor)
	code, body, err := c.do(ctx, op, call{method: http.MethodGet, path: "/v1/leases/" + pathSegment(r.Namespace), query: q,
		requestID: r.RequestID})
	if err != nil {
		return protocol.ListResult{}, err
	}
	var out wire.ListPage
	absent, err := wire.Decode(body, &out)
	if err != nil || out.Status == "" {
		return protocol.ListResult{}, badAnswer(op, code, body)
	}
	if err := answerError(op, code, protocol.Status(out.Status), out.Message, out.ErrorCode); err != nil {
		return protocol.ListResult{}, err
	}
	if absent != nil {
		return protocol.ListResult{}, backendkit.NewError(op, protocol.StatusUnavailable, absent, "httpapi: the server's answer does not parse")
	}
	res, err := out.Protocol()
	if err != nil {
		return protocol.ListResult{}, backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: the server's answer does not parse")
	}
	return res, nil
}

// Health implements [protocol.Backend]: the server's /readyz, which asks
// its store, then one authenticated call (GET /v1/namespaces?limit=1,
// which every role may make, for the namespaces its token allows). /readyz
// takes no token, so without that call a client whose token the server
// refuses would be healthy while every operation fails; as bad
// credentials fail the health of the SQL and etcd backends, a refused token
// fails Health with a *[RefusedError] (401 or 403).
func (c *Client) Health(ctx context.Context) error {
	const op = protocol.OpHealth
	code, body, err := c.do(ctx, op, call{method: http.MethodGet, path: "/readyz"})
	if err != nil {
		return err
	}
	var out wire.Error
	if err := json.Unmarshal(body, &out); err != nil || out.Status == "" {
		return badAnswer(op, code, body)
	}
	if code != http.StatusOK || out.Status != "healthy" {
		if err := answerError(op, code, protocol.Status(out.Status), out.Message, out.ErrorCode); err != nil {
			return err
		}
		return backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server is not ready: HTTP %d, status %q: %s", code, out.Status, out.Message)
	}
	return c.checkToken(ctx)
}

// checkToken makes Health's authenticated call: GET /v1/namespaces with
// limit 1. A server whose store cannot list namespaces answers 501 after
// it authenticated the token, which is enough; a server older than that
// route answers 404, and its token is checked by every other call only.
func (c *Client) checkToken(ctx context.Context) error {
	const op = protocol.OpHealth
	code, body, err := c.do(ctx, op, call{method: http.MethodGet, path: "/v1/namespaces", query: url.Values{"limit": {"1"}}})
	if err != nil {
		return err
	}
	if code == http.StatusNotFound {
		return nil
	}
	var out wire.NamespacePage
	if err := json.Unmarshal(body, &out); err != nil || out.Status == "" {
		return badAnswer(op, code, body)
	}
	status := protocol.Status(out.Status)
	switch {
	case code == http.StatusOK && status == protocol.StatusFound,
		code == http.StatusNotImplemented && status == StatusNotImplemented:
		return nil
	}
	if err := answerError(op, code, status, out.Message, out.ErrorCode); err != nil {
		return err
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, nil, "httpapi: the server answered the token check (GET /v1/namespaces) "+
		"HTTP %d, status %q: %s", code, status, out.Message)
}

// ReadAudit implements [audit.Reader] over GET /v1/audit.
// A query that fails [audit.Query.Validate] is refused here, as the
// backends refuse it (an op with a comma would otherwise reach the server
// as two).
func (c *Client) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	const op = protocol.OpAudit
	if err := q.Validate(); err != nil {
		return audit.Page{}, backendkit.NewError(op, protocol.StatusInvalid, err, "audit: bad query")
	}
	v := url.Values{}
	if q.Namespace != "" {
		v.Set("namespace", q.Namespace)
	}
	if q.Key != "" {
		v.Set("key", q.Key)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	if len(q.Ops) > 0 {
		v.Set("op", audit.FormatOps(q.Ops))
	}
	if q.Owner != "" {
		v.Set("owner", q.Owner)
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	code, body, err := c.do(ctx, op, call{method: http.MethodGet, path: "/v1/audit", query: v})
	if err != nil {
		return audit.Page{}, err
	}
	var out wire.AuditPage
	absent, err := wire.Decode(body, &out)
	if err != nil || out.Status == "" {
		return audit.Page{}, badAnswer(op, code, body)
	}
	status := protocol.Status(out.Status)
	if err := answerError(op, code, status, out.Message, out.ErrorCode); err != nil {
		return audit.Page{}, err
	}
	if status != protocol.StatusFound {
		// invalid: the backends report a bad query as an error too.
		return audit.Page{}, backendkit.NewError(op, status, nil, "%s", out.Message)
	}
	err = absent
	var page audit.Page
	if err == nil {
		page, err = out.Audit()
	}
	if err != nil {
		return audit.Page{}, backendkit.NewError(op, protocol.StatusUnavailable, err, "httpapi: the server's answer does not parse")
	}
	return page, nil
}
