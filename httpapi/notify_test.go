package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// rawStream is a notification stream read with plain net/http.
type rawStream struct {
	t     *testing.T
	resp  *http.Response
	lines chan string // closed when the stream ended
}

// openStream sends GET url with headers (name, value pairs) and, on 200,
// reads its lines in the background until the test ends.
func openStream(t *testing.T, url string, headers ...string) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	rs := &rawStream{t: t, resp: resp, lines: make(chan string, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(rs.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			rs.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		for range rs.lines {
		}
		<-done
		tr.CloseIdleConnections()
	})
	return rs
}

// event waits for the next event and returns its name and data, skipping
// comments; comments counts the comment lines skipped.
func (rs *rawStream) event() (name string, ev wire.NotifyEvent, comments int) {
	rs.t.Helper()
	name, data, comments, ok := rs.rawEvent()
	if !ok {
		rs.t.Fatalf("the stream ended before an event (after event %q)", name)
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		rs.t.Fatalf("event %s: data %q: %v", name, data, err)
	}
	return name, ev, comments
}

// rawEvent waits for the next event and returns its name and its data
// as sent, skipping comments (counted in comments); ok is false when the
// stream ended first.
func (rs *rawStream) rawEvent() (name, data string, comments int, ok bool) {
	rs.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, open := <-rs.lines:
			switch {
			case !open:
				return name, "", comments, false
			case strings.HasPrefix(line, ":"):
				comments++
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && name != "":
				return name, data, comments, true
			}
		case <-timeout:
			rs.t.Fatal("no event within 10s")
		}
	}
}

// ended waits for the stream to end.
func (rs *rawStream) ended() {
	rs.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-rs.lines:
			if !ok {
				return
			}
		case <-timeout:
			rs.t.Fatal("the stream did not end within 10s")
		}
	}
}

// signalled waits for a signal on ch.
func signalled(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no signal within 10s", what)
	}
}

// quiet checks that ch has no signal pending.
func quiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: a signal", what)
	default:
	}
}

// memRuntime returns a fresh in-memory store, closed when the test ends.
func memRuntime(t *testing.T) *protocol.Runtime {
	rt := protocol.New(memstore.New(nil), nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// quietHandler returns a handler of store that logs nothing.
func quietHandler(t *testing.T, store protocol.Store) *httpapi.Handler {
	t.Helper()
	h, err := httpapi.NewHandler(store, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// hold acquires k for owner through rt and returns the lease.
func hold(t *testing.T, rt protocol.Store, k protocol.Key, owner string) protocol.Lease {
	t.Helper()
	res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: k, Owner: owner, TTL: time.Hour})
	if err != nil {
		t.Fatalf("acquire %s: %v", k, err)
	}
	return *res.Lease
}

// let releases l through rt.
func let(t *testing.T, rt protocol.Store, l protocol.Lease) {
	t.Helper()
	if _, err := rt.Release(t.Context(), protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token}); err != nil {
		t.Fatalf("release %s: %v", l.Key, err)
	}
}

// TestNotifyRoute: the stream's events (subscribed, keep-alive comments, a
// signal per release or revoke), and the route's refusals.
func TestNotifyRoute(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, KeepAlive: 30 * time.Millisecond})
	r := []string{"Authorization", "Bearer " + readerToken}
	k := protocol.Key{Namespace: "scan", Name: "a/b"}

	rs := openStream(t, s.url+httpapi.NotifyPath(k), r...)
	if rs.resp.StatusCode != 200 || rs.resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("notify: HTTP %d, Content-Type %q", rs.resp.StatusCode, rs.resp.Header.Get("Content-Type"))
	}
	name, ev, _ := rs.event()
	if name != "subscribed" || ev.Status != "subscribed" || ev.KeepAlive != "30ms" {
		t.Fatalf("first event %q %+v, want subscribed with keep_alive 30ms", name, ev)
	}
	l := hold(t, s.rt, k, "w1")
	let(t, s.rt, l)
	name, ev, _ = rs.event()
	if name != "signal" || ev.Status != "signal" {
		t.Fatalf("after a release: event %q %+v, want signal", name, ev)
	}
	// Nothing else to send: keep-alive comments, then the revoke's signal.
	time.Sleep(100 * time.Millisecond)
	hold(t, s.rt, k, "w2")
	if _, err := s.rt.Revoke(t.Context(), protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	name, _, comments := rs.event()
	if name != "signal" || comments == 0 {
		t.Fatalf("after a revoke: event %q after %d keep-alive comments, want signal after some", name, comments)
	}

	expect(t, "no token", send(t, "GET", s.url+"/v1/notify/scan/k", ""), 401, "unauthorized")
	expect(t, "other namespace", send(t, "GET", s.url+"/v1/notify/billing/k", "", r...), 403, "forbidden")
	expect(t, "control character", send(t, "GET", s.url+"/v1/notify/scan/a%01b", "", r...), 400, "invalid")
	expect(t, "no key", send(t, "GET", s.url+"/v1/notify/scan", "", r...), 400, "invalid")
	expect(t, "empty key", send(t, "GET", s.url+"/v1/notify/scan/", "", r...), 400, "invalid")
	expect(t, "query", send(t, "GET", s.url+"/v1/notify/scan/k?since=1", "", r...), 400, "invalid")
	expect(t, "bad timeout", send(t, "GET", s.url+"/v1/notify/scan/k", "", append(r, httpapi.HeaderTimeout, "x")...), 400, "invalid")
	for _, m := range []string{"POST", "HEAD"} {
		rep := send(t, m, s.url+"/v1/notify/scan/k", "", r...)
		if rep.code != 405 || rep.header.Get("Allow") != "GET" {
			t.Fatalf("%s: HTTP %d, Allow %q", m, rep.code, rep.header.Get("Allow"))
		}
	}
}

// TestNotifyEndsWhenTheStoreCloses: the stream's last event says closed.
func TestNotifyEndsWhenTheStoreCloses(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	rs := openStream(t, s.url+"/v1/notify/ns/k")
	if name, _, _ := rs.event(); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	c := newClient(t, s.url, nil)
	ch, cancel, err := c.Subscribe(t.Context(), protocol.Key{Namespace: "ns", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if err := s.rt.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	name, ev, _ := rs.event()
	if name != "end" || ev.Status != "closed" {
		t.Fatalf("after the store closed: event %q %+v, want end with status closed", name, ev)
	}
	rs.ended()
	signalled(t, ch, "the client's subscription when the store closed")
	expect(t, "subscribe to a closed store", send(t, "GET", s.url+"/v1/notify/ns/k", ""), 503, "closed")
}

// TestNotifyDoesNotHoldUpShutdown: an http.Server's Shutdown with
// CloseStreams registered ends the streams at once (each with an end
// event), and the client's subscriber is signalled.
func TestNotifyDoesNotHoldUpShutdown(t *testing.T) {
	t.Parallel()
	rt := memRuntime(t)
	h := quietHandler(t, rt)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	srv.RegisterOnShutdown(h.CloseStreams)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	url := "http://" + l.Addr().String()

	rs := openStream(t, url+"/v1/notify/ns/k")
	if name, _, _ := rs.event(); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	c := newClient(t, url, nil)
	ch, cancel, err := c.Subscribe(t.Context(), protocol.Key{Namespace: "ns", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	quiet(t, ch, "a live subscription")
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v with two streams open", took)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	name, ev, _ := rs.event()
	if name != "end" || ev.Status != "unavailable" {
		t.Fatalf("at shutdown: event %q %+v, want end with status unavailable", name, ev)
	}
	rs.ended()
	signalled(t, ch, "the client's subscription at shutdown")
	cancel()
	cancel() // idempotent
}

// TestNotifyAfterCloseStreams: a handler whose streams were closed
// refuses new ones (503) and serves the other routes.
func TestNotifyAfterCloseStreams(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	s.h.CloseStreams()
	s.h.CloseStreams() // idempotent
	expect(t, "notify after CloseStreams", send(t, "GET", s.url+"/v1/notify/ns/k", ""), 503, "unavailable")
	expect(t, "get after CloseStreams", send(t, "GET", s.url+"/v1/leases/ns/k", ""), 404, "not_found")
}

// TestClientSubscribe: signals through the Go client; cancel closes the
// stream (the server's request ends) and is idempotent; Close signals and
// ends the client's subscriptions; a closed client cannot subscribe.
func TestClientSubscribe(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	c, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	k := protocol.Key{Namespace: "ns", Name: "k"}
	ch, cancel, err := c.Subscribe(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	quiet(t, ch, "a fresh subscription")
	let(t, s.rt, hold(t, s.rt, k, "w"))
	signalled(t, ch, "a release")
	hold(t, s.rt, protocol.Key{Namespace: "ns", Name: "other"}, "w")
	let(t, s.rt, hold(t, s.rt, protocol.Key{Namespace: "other", Name: "k"}, "w"))
	time.Sleep(50 * time.Millisecond)
	quiet(t, ch, "changes of other keys")
	cancel()
	cancel()
	// The server saw the stream end: its access record is written then.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log.String(), `"route":"notify"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's stream did not end after cancel; log:\n%s", s.log)
		}
		time.Sleep(10 * time.Millisecond)
	}

	ch2, cancel2, err := c.Subscribe(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	signalled(t, ch2, "the client's Close")
	if _, _, err := c.Subscribe(t.Context(), k); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("subscribe through a closed client: %v", err)
	}
}

// TestClientSubscribeReconnects: a stream that breaks signals the
// subscriber, and the client reconnects, so a later release signals too.
func TestClientSubscribeReconnects(t *testing.T) {
	t.Parallel()
	rt := memRuntime(t)
	h := quietHandler(t, rt)
	subscribed := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/notify/") {
			subscribed <- struct{}{}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	k := protocol.Key{Namespace: "ns", Name: "k"}
	ch, cancel, err := c.Subscribe(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	<-subscribed
	srv.CloseClientConnections()
	signalled(t, ch, "a broken stream")
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not reconnect within 10s")
	}
	signalled(t, ch, "the stream back") // releases in between went unheard
	let(t, rt, hold(t, rt, k, "w"))
	signalled(t, ch, "a release after the reconnection")
}

// TestClientSubscribeSilentStream: a stream that stops sending (not even
// keep-alive comments) is taken for dead: the subscriber is signalled.
func TestClientSubscribeSilentStream(t *testing.T) {
	t.Parallel()
	opened := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: subscribed\ndata: {\"status\":\"subscribed\",\"message\":\"\",\"keep_alive\":\"100ms\"}\n\n"))
		w.(http.Flusher).Flush()
		opened <- struct{}{}
		<-r.Context().Done() // silent
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	ch, cancel, err := c.Subscribe(t.Context(), protocol.Key{Namespace: "ns", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	<-opened
	start := time.Now()
	signalled(t, ch, "a silent stream")
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("signalled %v after the stream opened, before it was silent for two keep-alive intervals", took)
	}
}

// noNotifier is a served store that cannot signal.
type noNotifier struct{ protocol.Store }

// TestWaitWithoutNotifier: a server whose store cannot signal answers
// 501, and one without the route (an older server) 404; the client's
// Subscribe fails with ErrNoNotifier for both, and AcquireWait over it
// falls back to polling: it still takes the key after a release.
func TestWaitWithoutNotifier(t *testing.T) {
	t.Parallel()
	served := memRuntime(t)
	h := quietHandler(t, noNotifier{served})
	srv := httptest.NewServer(h)
	defer srv.Close()
	expect(t, "notify without a notifier", send(t, "GET", srv.URL+"/v1/notify/ns/k", ""), 501, "not_implemented")
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/notify/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"status":"invalid","message":"no route"}`))
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer older.Close()
	k := protocol.Key{Namespace: "ns", Name: "k"}
	for _, url := range []string{srv.URL, older.URL} {
		c := newClient(t, url, nil)
		if _, _, err := c.Subscribe(t.Context(), k); !errors.Is(err, protocol.ErrNoNotifier) {
			t.Fatalf("subscribe at %s: %v, want ErrNoNotifier", url, err)
		}
		held := hold(t, served, k, "holder")
		asleep := make(chan struct{}, 1)
		done := make(chan error, 1)
		go func() {
			res, err := c.AcquireWait(t.Context(), protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute},
				&protocol.WaitConfig{Waiting: func(protocol.Lease) {
					select {
					case asleep <- struct{}{}:
					default:
					}
				}})
			if err == nil && res.Status != protocol.StatusAcquired {
				err = errors.New(string(res.Status))
			}
			done <- err
		}()
		<-asleep
		let(t, served, held)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the waiter: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the polling waiter did not take the key within 10s of the release")
		}
		res, err := served.Get(t.Context(), protocol.GetRequest{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		let(t, served, *res.Lease)
	}
}

// TestClientSubscribeRefusals: what the client makes of each answer that
// is not a live stream. None leaves a subscription behind.
func TestClientSubscribeRefusals(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	k := protocol.Key{Namespace: "scan", Name: "k"}
	for _, tc := range []struct {
		name string
		tok  string
		want error
		msg  string
	}{
		{"no token", "", protocol.ErrUnavailable, "HTTP 401"},
		{"namespace not allowed", billingTok, protocol.ErrUnavailable, "HTTP 403"},
	} {
		c := newClient(t, s.url, &httpapi.ClientConfig{Token: tc.tok})
		if _, _, err := c.Subscribe(t.Context(), k); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.want, tc.msg)
		}
	}

	stalled := make(chan struct{})
	defer close(stalled)
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		want   error
		msg    string
	}{
		{"a proxy's error page", canned("text/html", 502, "<html>bad gateway</html>"), protocol.ErrUnavailable, "without a lease API body"},
		{"200 that is not a stream", canned("application/json", 200, `{"status":"found"}`), protocol.ErrUnavailable, "without a lease API body"},
		{"a stream that starts with a signal", canned("text/event-stream", 200, "event: signal\ndata: {\"status\":\"signal\",\"message\":\"\"}\n\n"),
			protocol.ErrUnavailable, "not subscribed"},
		{"a stream without keep_alive", canned("text/event-stream", 200, "event: subscribed\ndata: {\"status\":\"subscribed\",\"message\":\"\"}\n\n"),
			protocol.ErrUnavailable, "keep_alive"},
		{"a stream that ends before its first event", canned("text/event-stream", 200, ": keep-alive\n\n"), protocol.ErrUnavailable, "could not be reached"},
		{"a server that answers 503", canned("application/json", 503, `{"status":"unavailable","message":"the listener is down"}`),
			protocol.ErrUnavailable, "the listener is down"},
		{"no first event before the deadline", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-stalled:
			}
		}, protocol.ErrTimeout, "deadline"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(tc.handle))
		c := newClient(t, srv.URL, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, _, err := c.Subscribe(ctx, k)
		cancel()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.want, tc.msg)
		}
		srv.Close()
	}
}

// canned answers every request with code, contentType and body.
func canned(contentType string, code int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// TestAuditFollowEndsWhenTheStoreCloses: the audit follow stream ends,
// with an end event of status closed, when its store closes, as the
// notify stream does. It sent an error event of status closed every
// 200ms for as long as the client stayed, and an http.Server's Close
// waited for it.
func TestAuditFollowEndsWhenTheStoreCloses(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	h, err := httpapi.NewHandler(rt, audit.RuntimeReader(rt), &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rs := openStream(t, srv.URL+"/v1/audit/follow?namespace=ns")
	if name, _, _ := rs.event(); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	if err := rt.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	name, ev, _ := rs.event()
	if name != "end" || ev.Status != "closed" {
		t.Fatalf("after the store closed: event %q %+v, want end with status closed", name, ev)
	}
	rs.ended()
}
