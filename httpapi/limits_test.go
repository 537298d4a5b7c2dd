package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// rawExchange sends head (a request's line and headers) on a fresh TCP
// connection to the server at url, then drips the body one byte every
// drip (no body when drip is 0) and returns the status line of the answer
// and how long it took the server to close the connection after the
// request began. It gives up after limit.
func rawExchange(t *testing.T, url, head string, bodyLen int, drip, limit time.Duration) (status string, closedAfter time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(limit))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	defer stop.Store(true)
	if drip > 0 {
		go func() {
			for i := 0; i < bodyLen && !stop.Load(); i++ {
				time.Sleep(drip)
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
	}
	rd := bufio.NewReader(conn)
	status, err = rd.ReadString('\n')
	t.Logf("%q after %v", strings.TrimSpace(status), time.Since(start))
	if err != nil {
		t.Fatalf("no answer within %v (%v): the server waits for a body that does not come", limit, err)
	}
	// A reset is a close too: the server closed with the dripped bytes
	// unread, so its kernel answered them with RST rather than FIN.
	if _, err := io.Copy(io.Discard, rd); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("answered %q, but the connection stayed open past %v: %v", strings.TrimSpace(status), limit, err)
	}
	return strings.TrimSpace(status), time.Since(start)
}

// TestSlowBodiesAreCutOff: a client that announces a body (within the
// 64 KiB limit: one declared larger is answered 413 at once) and does not
// send it, or sends it a byte at a time, is answered and disconnected within the
// body timeout, before authentication too, and the access log says what
// was sent.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, BodyTimeout: time.Second})
	head := func(auth string) string {
		h := "POST /v1/acquire HTTP/1.1\r\nHost: leasestore\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n"
		if auth != "" {
			h += "Authorization: Bearer " + auth + "\r\n"
		}
		return h + "\r\n"
	}
	// No token, no body: 401 at once, and the connection closes without
	// the server reading the 60,000 bytes it was promised.
	status, took := rawExchange(t, s.url, head(""), 0, 0, 20*time.Second)
	if !strings.HasPrefix(status, "HTTP/1.1 401") {
		t.Fatalf("no token, no body: %q", status)
	}
	t.Logf("unauthenticated, body never sent: %s, closed after %v", status, took)
	// A reader's token on a writer's route: 403 at once, likewise.
	status, _ = rawExchange(t, s.url, head(readerToken), 0, 0, 20*time.Second)
	if !strings.HasPrefix(status, "HTTP/1.1 403") {
		t.Fatalf("reader token, no body: %q", status)
	}
	// A writer that trickles its body: 408 once the body timeout passed.
	status, took = rawExchange(t, s.url, head(writerToken), 60000, 100*time.Millisecond, 20*time.Second)
	if !strings.HasPrefix(status, "HTTP/1.1 408") {
		t.Fatalf("trickled body: %q", status)
	}
	t.Logf("authenticated, body trickled: %s, closed after %v", status, took)
	for _, want := range []string{`"code":401`, `"code":403`, `"code":408`} {
		if !strings.Contains(s.log.String(), want) {
			t.Errorf("the access log has no %s:\n%s", want, s.log.String())
		}
	}
}

// mustTokens parses the test's tokens file.
func mustTokens(t *testing.T) *httpapi.Tokens {
	t.Helper()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// TestStreamCaps: streams are capped per token (429, too_many_streams) and
// per server (503), each refusal naming its cap's flag; a stream that ends
// gives its place back.
func TestStreamCaps(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, MaxStreams: 3, MaxStreamsPerToken: 2})
	r, a := []string{"Authorization", "Bearer " + readerToken}, []string{"Authorization", "Bearer " + adminToken}
	first := openStream(t, s.url+"/v1/notify/scan/k1", r...)
	openStream(t, s.url+"/v1/notify/scan/k2", r...)
	for _, rs := range []*rawStream{first} {
		if name, _, _ := rs.event(); name != "subscribed" {
			t.Fatalf("first event %q", name)
		}
	}
	m := expect(t, "third stream of one token", send(t, "GET", s.url+"/v1/notify/scan/k3", "", r...), 429, "too_many_streams")
	if msg := m["message"].(string); !strings.Contains(msg, "--max-streams-per-token") || !strings.Contains(msg, "2") {
		t.Fatalf("429 message %q: want the cap and its flag", msg)
	}
	openStream(t, s.url+"/v1/notify/scan/k3", a...)
	m = expect(t, "fourth stream of the server", send(t, "GET", s.url+"/v1/notify/scan/k4", "", a...), 503, "unavailable")
	if msg := m["message"].(string); !strings.Contains(msg, "--max-streams") || !strings.Contains(msg, "3") {
		t.Fatalf("503 message %q: want the cap and its flag", msg)
	}
	// The first stream goes away: its token may open one again.
	_ = first.resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := send(t, "GET", s.url+"/v1/leases/scan", "", r...) // a plain request is never capped
		if rs.code != 200 {
			t.Fatalf("list while streams are capped: %d", rs.code)
		}
		probe := openStreamOrCode(t, s.url+"/v1/notify/scan/k5", r...)
		if probe == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token's closed stream did not give its place back: still %d", probe)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openStreamOrCode opens a stream that lasts until the test ends when the
// server answers 200, and returns the code.
func openStreamOrCode(t *testing.T, url string, headers ...string) int {
	t.Helper()
	rs := openStream(t, url, headers...)
	return rs.resp.StatusCode
}

// TestStreamEndsWhenItsTokenIsRemoved: at a reload that removes a stream's
// token, or narrows it so that it no longer allows the stream, the stream
// ends (event end, status unauthorized or forbidden); streams of tokens
// that still allow them go on.
func TestStreamEndsWhenItsTokenIsRemoved(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[httpapi.Tokens]
	current.Store(mustTokens(t))
	s := newServer(t, &httpapi.Config{Tokens: current.Load})
	removed := openStream(t, s.url+"/v1/notify/scan/k", "Authorization", "Bearer "+readerToken)
	narrowed := openStream(t, s.url+"/v1/notify/scan/k", "Authorization", "Bearer "+billingTok) // admin of billing: 403 below
	kept := openStream(t, s.url+"/v1/notify/scan/k", "Authorization", "Bearer "+adminToken)
	if removed.resp.StatusCode != 200 || kept.resp.StatusCode != 200 {
		t.Fatalf("streams: %d, %d", removed.resp.StatusCode, kept.resp.StatusCode)
	}
	if narrowed.resp.StatusCode != 403 {
		t.Fatalf("billing's token on scan: %d, want 403", narrowed.resp.StatusCode)
	}
	narrowed = openStream(t, s.url+"/v1/notify/billing/k", "Authorization", "Bearer "+billingTok)
	for _, rs := range []*rawStream{removed, narrowed, kept} {
		if name, _, _ := rs.event(); name != "subscribed" {
			t.Fatalf("first event %q", name)
		}
	}
	// The reader's line goes; billing's token becomes a reader of another
	// namespace.
	next, err := httpapi.ParseTokens(strings.NewReader(adminToken + " admin *\n" + billingTok + " reader elsewhere\n"))
	if err != nil {
		t.Fatal(err)
	}
	current.Store(next)
	s.h.TokensReloaded()
	for rs, want := range map[*rawStream]string{removed: "unauthorized", narrowed: "forbidden"} {
		name, ev, _ := rs.event()
		if name != "end" || ev.Status != want {
			t.Fatalf("after the reload: event %q status %q (%s), want end %s", name, ev.Status, ev.Message, want)
		}
		rs.ended()
	}
	let(t, s.rt, hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "k"}, "w"))
	if name, _, _ := kept.event(); name != "signal" {
		t.Fatalf("the admin's stream after the reload: event %q, want signal", name)
	}
}

// TestBrowsersCrossOriginWritesAreRefused: a page of another site that
// posts to the API (a form's text/plain body revoking a lease) is refused
// 403 and changes nothing; the same request from a client that is not a
// browser, or from the API's own origin, is answered.
func TestBrowsersCrossOriginWritesAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil) // no tokens: every request may do everything
	k := protocol.Key{Namespace: "default", Name: "db-migrate"}
	held := hold(t, s.rt, k, "worker-1")
	revoke := `{"namespace":"default","key":"db-migrate","actor":"x","reason":"y"}`
	for _, headers := range [][]string{
		{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"},
		{"Content-Type", "text/plain", "Sec-Fetch-Site", "same-site"},
		{"Content-Type", "text/plain", "Origin", "http://evil.example"}, // a browser without Sec-Fetch-Site
	} {
		expect(t, fmt.Sprintf("revoke with %v", headers), send(t, "POST", s.url+"/v1/revoke", revoke, headers...), 403, "forbidden")
	}
	res, err := s.rt.Get(t.Context(), protocol.GetRequest{Key: k})
	if err != nil || res.Status != protocol.StatusFound || res.Lease.Token != held.Token {
		t.Fatalf("after refused cross-origin revokes: %+v %v, want the lease held", res, err)
	}
	// Reads are not writes; a browser on the API's own origin, and curl, write.
	expect(t, "cross-site get", send(t, "GET", s.url+"/v1/leases/default/db-migrate", "", "Sec-Fetch-Site", "cross-site"), 200, "found")
	expect(t, "same-origin revoke", send(t, "POST", s.url+"/v1/revoke", revoke, "Sec-Fetch-Site", "same-origin"), 200, "revoked")
	hold(t, s.rt, k, "worker-1")
	expect(t, "revoke without browser headers", send(t, "POST", s.url+"/v1/revoke", revoke), 200, "revoked")
}

// TestLoopbackOnlyRefusesOtherHosts: with Config.LoopbackOnly (serve
// without tokens) a request addressed to another name, as a page that
// rebound its own name to 127.0.0.1 sends, is refused 403; loopback names
// and addresses are answered.
func TestLoopbackOnlyRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	s := newServer(t, &httpapi.Config{LoopbackOnly: true})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(host string) reply {
		req, err := http.NewRequest("GET", s.url+"/v1/leases/default", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host, req.Close = host, true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return reply{code: resp.StatusCode, header: resp.Header, body: string(body)}
	}
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "10.0.0.1:" + port, "localhost.attacker.example:" + port} {
		m := expect(t, "Host "+host, get(host), 403, "forbidden")
		if !strings.Contains(m["message"].(string), "--tokens") {
			t.Fatalf("Host %s: %v, want the message to name --tokens", host, m)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "api.localhost:" + port, "[::1]:" + port, "127.0.0.2"} {
		expect(t, "Host "+host, get(host), 200, "found")
	}
	// An HTTP/1.0 request without Host (a plain health checker's): no
	// browser sends one, so no rebinding either.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if status, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.0 200") {
		t.Fatalf("an HTTP/1.0 request without Host: %q %v, want 200", status, err)
	}
}
