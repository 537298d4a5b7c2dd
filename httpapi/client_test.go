package httpapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

func newClient(t *testing.T, url string, cfg *httpapi.ClientConfig) *protocol.Runtime {
	t.Helper()
	c, err := httpapi.NewClient(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(c, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

func TestNewClientRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:7070", "ftp://host", "http://", "http://u:p@host", "http://host?x=1", "http://host#f"} {
		if _, err := httpapi.NewClient(u, nil); err == nil {
			t.Errorf("NewClient(%q): no error", u)
		} else if strings.Contains(err.Error(), ":p@") {
			t.Errorf("NewClient(%q): the error repeats a password: %v", u, err)
		}
	}
}

// TestClientUnreachable: a port nobody listens on is unavailable, after
// the configured attempts.
func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	rt := newClient(t, "http://"+addr, &httpapi.ClientConfig{MaxAttempts: 2})
	res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Second})
	if res.Status != protocol.StatusUnavailable || !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("acquire against a closed port: %q, %v", res.Status, err)
	}
	if err := rt.Health(t.Context()); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("health against a closed port: %v", err)
	}
}

// blockingStore answers acquire only when its context ends.
type blockingStore struct {
	protocol.Store
	deadlines chan time.Duration
}

func (b blockingStore) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	dl, _ := ctx.Deadline()
	b.deadlines <- time.Until(dl)
	<-ctx.Done()
	return b.Store.Acquire(ctx, req) // the runtime answers timeout for a done context
}

// TestDeadlines: the server runs a request under the caller's deadline
// (Request-Timeout), cut to its maximum, and the client reports a deadline
// that passed as timeout.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	store := blockingStore{Store: s.rt, deadlines: make(chan time.Duration, 4)}
	h, err := httpapi.NewHandler(store, nil, &httpapi.Config{MaxTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// Asking for more than the maximum gets the maximum: 504 timeout.
	r := send(t, "POST", srv.URL+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`, httpapi.HeaderTimeout, "1h")
	expect(t, "long deadline", r, 504, "timeout")
	if d := <-store.deadlines; d > 300*time.Millisecond || d <= 0 {
		t.Fatalf("the store ran with %v left, want at most the maximum", d)
	}

	rt := newClient(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Second})
	if res.Status != protocol.StatusTimeout || !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("acquire past its deadline: %q, %v", res.Status, err)
	}
	if d := <-store.deadlines; d > 200*time.Millisecond {
		t.Fatalf("the server ran with %v left, more than the caller's deadline", d)
	}
}

// TestClientRetriesWithTheSameRequestID: a connection that breaks before
// the answer is retried with the same request id, so the change is made
// once and the retry learns its outcome.
func TestClientRetriesWithTheSameRequestID(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	var (
		mu   sync.Mutex
		keys []string
		n    atomic.Int64
	)
	// The first attempt reaches the store, then its connection is cut
	// before the answer; the second attempt is answered.
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(httpapi.HeaderIdempotencyKey))
		mu.Unlock()
		if n.Add(1) == 1 {
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		s.h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(front)
	defer srv.Close()
	rt := newClient(t, srv.URL, nil)
	res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Minute})
	if err != nil || res.Status != protocol.StatusAcquired || !res.Replayed {
		t.Fatalf("acquire over a broken connection: %+v, %v; want the first attempt's outcome, replayed", res, err)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || keys[0] != res.RequestID {
		t.Fatalf("attempts carried request ids %q, result %q", keys, res.RequestID)
	}
	page, err := s.rt.List(t.Context(), protocol.ListRequest{Namespace: "ns"})
	if err != nil || len(page.Leases) != 1 || page.Leases[0].Token != res.Lease.Token {
		t.Fatalf("store after the retry: %+v, %v", page, err)
	}
}

// TestClientRefusedIsUnavailable: 401 and 403 reach the caller as
// unavailable (the store was not reached), with the server's reason,
// matching ErrUnauthorized or ErrForbidden, and protocol.ErrUnauthenticated
// or protocol.ErrForbidden, so that a caller can tell a bad token from an
// outage.
func TestClientRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	key := protocol.Key{Namespace: "scan", Name: "k"}
	sentinel := map[string]error{"401": httpapi.ErrUnauthorized, "403": httpapi.ErrForbidden}
	shared := map[string]error{"401": protocol.ErrUnauthenticated, "403": protocol.ErrForbidden}
	other := map[string]error{"401": protocol.ErrForbidden, "403": protocol.ErrUnauthenticated}
	for tok, want := range map[string]string{"": "401", "an-unknown-token-0123": "401", readerToken: "403", writerToken: ""} {
		rt := newClient(t, s.url, &httpapi.ClientConfig{Token: tok})
		_, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "o", TTL: time.Minute})
		if want == "" {
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			continue
		}
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("token %q: %v, want unavailable naming HTTP %s", tok, err, want)
		}
		var refused *httpapi.RefusedError
		if !errors.Is(err, sentinel[want]) || !errors.As(err, &refused) || refused.Code != httpCode(want) {
			t.Fatalf("token %q: %v (%#v), want an error matching %v", tok, err, refused, sentinel[want])
		}
		// The protocol's sentinels too, which every backend's refusal of
		// its credentials or their permission matches.
		if !errors.Is(err, shared[want]) || errors.Is(err, other[want]) {
			t.Fatalf("token %q: %v, want an error matching %v (and not %v)", tok, err, shared[want], other[want])
		}
	}
	c, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: readerToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.ReadAudit(t.Context(), audit.Query{}); !errors.Is(err, httpapi.ErrForbidden) ||
		!strings.Contains(err.Error(), "may not read the audit trail in every namespace") {
		t.Fatalf("reader's audit of every namespace: %v", err)
	}
	if _, _, err := c.Subscribe(t.Context(), protocol.Key{Namespace: "billing", Name: "k"}); !errors.Is(err, httpapi.ErrForbidden) ||
		!strings.Contains(err.Error(), "may not subscribe to signals in namespace \"billing\"") {
		t.Fatalf("reader's subscription in billing: %v", err)
	}
	if p, err := c.ReadAudit(t.Context(), audit.Query{Namespace: "scan"}); err != nil || len(p.Records) != 1 {
		t.Fatalf("reader's audit of scan: %+v, %v", p, err)
	}
}

// httpCode returns the HTTP code a test names as text.
func httpCode(code string) int {
	n, _ := strconv.Atoi(code)
	return n
}

// TestClientRefusesForeignAnswers: a body that is not the API's, or a code
// that does not go with its status, is unavailable, not taken at its word.
func TestClientRefusesForeignAnswers(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]http.HandlerFunc{
		"html": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		},
		"code and status disagree": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"status":"conflict","replayed":false,"request_id":"x","message":"m","lease":null}`))
		},
		"unknown status": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"status":"granted","replayed":false,"request_id":"x","message":"m","lease":null}`))
		},
	} {
		srv := httptest.NewServer(h)
		rt := newClient(t, srv.URL, nil)
		res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", TTL: time.Minute})
		srv.Close()
		if res.Status != protocol.StatusUnavailable || !errors.Is(err, protocol.ErrUnavailable) {
			t.Errorf("%s: %q, %v", name, res.Status, err)
		}
	}
}

// TestMetrics: /metrics counts requests by route, method and code.
func TestMetrics(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`), 200, "acquired")
	expect(t, "conflict", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"p","ttl":"30s"}`), 409, "conflict")
	r := send(t, "GET", s.url+"/metrics", "")
	for _, want := range []string{
		httpapi.RequestsTotalName + `{code="200",method="POST",route="acquire"} 1`,
		httpapi.RequestsTotalName + `{code="409",method="POST",route="acquire"} 1`,
		httpapi.RequestDurationName + `_count{route="acquire"} 2`,
		httpapi.InFlightName + " 1", // the scrape itself
	} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("metrics lack %q:\n%s", want, r.body)
		}
	}
}

// TestClientHealthChecksToken: Health asks /readyz (no token) and then
// makes one authenticated call, so a token the server refuses fails it
// with the error every operation gets (ErrUnauthorized, a RefusedError),
// while a reader token of one namespace passes. Health passed with any
// token.
func TestClientHealthChecksToken(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for tok, want := range map[string]error{"": httpapi.ErrUnauthorized, "an-unknown-token-0123": httpapi.ErrUnauthorized,
		readerToken: nil, billingTok: nil, adminToken: nil} {
		err := newClient(t, s.url, &httpapi.ClientConfig{Token: tok}).Health(t.Context())
		var refused *httpapi.RefusedError
		switch {
		case want == nil && err != nil:
			t.Errorf("Health with token %q: %v, want healthy", tok, err)
		case want != nil && (!errors.Is(err, want) || !errors.As(err, &refused) || refused.Code != 401):
			t.Errorf("Health with token %q: %v, want a 401 RefusedError matching %v", tok, err, want)
		}
	}
	// A server older than GET /v1/namespaces answers it 404 ("no
	// route"): healthy still (it answered unavailable, reporting an
	// outage of a working server), the token checked by every other call.
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/namespaces" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":"invalid","message":"no route GET /v1/namespaces: see /openapi.json"}`))
			return
		}
		s.h.ServeHTTP(w, r)
	}))
	defer older.Close()
	if err := newClient(t, older.URL, &httpapi.ClientConfig{Token: readerToken}).Health(t.Context()); err != nil {
		t.Errorf("Health of a server without /v1/namespaces: %v, want healthy", err)
	}
}
