package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestRoutesAndCodes drives every lease route through each status it can
// answer and checks the HTTP code DESIGN.md pins for it.
func TestRoutesAndCodes(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	post := func(path, body string, headers ...string) reply { return send(t, "POST", s.url+path, body, headers...) }

	acq := expect(t, "acquire", post("/v1/acquire", `{"namespace":"scan","key":"10.0.0.0/24","owner":"w1","ttl":"30s","request_id":"r1"}`),
		200, "acquired")
	tok := token(t, acq)
	if acq["replayed"] != false || acq["request_id"] != "r1" {
		t.Fatalf("acquire body %v", acq)
	}
	// The same request id again: the first outcome, flagged as a replay.
	rep := expect(t, "replay", post("/v1/acquire", `{"namespace":"scan","key":"10.0.0.0/24","owner":"w1","ttl":"30s"}`,
		httpapi.HeaderIdempotencyKey, "r1"), 200, "acquired")
	if rep["replayed"] != true || token(t, rep) != tok {
		t.Fatalf("replay body %v", rep)
	}
	// The same id with other parameters is invalid.
	expect(t, "reused id", post("/v1/acquire", `{"namespace":"scan","key":"10.0.0.0/24","owner":"w2","ttl":"30s","request_id":"r1"}`),
		400, "invalid")
	con := expect(t, "conflict", post("/v1/acquire", `{"namespace":"scan","key":"10.0.0.0/24","owner":"w2","ttl":"30s"}`), 409, "conflict")
	if token(t, con) != tok {
		t.Fatalf("conflict carries %v", con)
	}

	// get, by the path with a literal slash and with %2F.
	for _, p := range []string{"/v1/leases/scan/10.0.0.0/24", "/v1/leases/scan/10.0.0.0%2F24"} {
		g := expect(t, "get "+p, send(t, "GET", s.url+p, ""), 200, "found")
		if token(t, g) != tok {
			t.Fatalf("get %s: %v", p, g)
		}
	}
	expect(t, "get missing", send(t, "GET", s.url+"/v1/leases/scan/nothing", ""), 404, "not_found")

	renew := fmt.Sprintf(`{"namespace":"scan","key":"10.0.0.0/24","owner":"w1","token":%d,"ttl":"1m"}`, tok)
	expect(t, "renew", post("/v1/renew", renew), 200, "renewed")
	expect(t, "renew not owner", post("/v1/renew", strings.Replace(renew, `"w1"`, `"w2"`, 1)), 409, "not_owner")
	expect(t, "renew missing", post("/v1/renew", strings.Replace(renew, "10.0.0.0/24", "other", 1)), 404, "not_found")

	// list: one page, then with filters.
	l := expect(t, "list", send(t, "GET", s.url+"/v1/leases/scan?limit=10&prefix=10.&owner=w1&include_expired=false", ""), 200, "found")
	if leases := l["leases"].([]any); len(leases) != 1 || l["next_cursor"] != "" {
		t.Fatalf("list %v", l)
	}
	expect(t, "list bad limit", send(t, "GET", s.url+"/v1/leases/scan?limit=x", ""), 400, "invalid")
	expect(t, "list unknown parameter", send(t, "GET", s.url+"/v1/leases/scan?color=red", ""), 400, "invalid")

	// Expiry: the holder's renew after the lease ran out is expired (410).
	s.clock.Advance(2 * time.Minute)
	expect(t, "renew expired", post("/v1/renew", renew), 410, "expired")
	next := expect(t, "acquire after expiry", post("/v1/acquire", `{"namespace":"scan","key":"10.0.0.0/24","owner":"w2","ttl":"30s"}`),
		200, "acquired")
	if token(t, next) <= tok {
		t.Fatalf("token %d after %d", token(t, next), tok)
	}
	expect(t, "renew stale", post("/v1/renew", renew), 409, "stale_token")
	release := fmt.Sprintf(`{"namespace":"scan","key":"10.0.0.0/24","owner":"w2","token":%d}`, token(t, next))
	expect(t, "release", post("/v1/release", release), 200, "released")
	expect(t, "release again", post("/v1/release", release), 404, "not_found")

	expect(t, "acquire for revoke", post("/v1/acquire", `{"namespace":"scan","key":"k2","owner":"w3","ttl":"30s"}`), 200, "acquired")
	expect(t, "revoke", post("/v1/revoke", `{"namespace":"scan","key":"k2","actor":"ops","reason":"stuck"}`), 200, "revoked")
	expect(t, "revoke nothing", post("/v1/revoke", `{"namespace":"scan","key":"k2","actor":"ops","reason":"stuck"}`), 404, "not_found")

	// audit: every change above, oldest first, with expires_at.
	a := expect(t, "audit", send(t, "GET", s.url+"/v1/audit?namespace=scan&limit=100", ""), 200, "found")
	recs := a["records"].([]any)
	var ops []string
	for _, r := range recs {
		ops = append(ops, r.(map[string]any)["op"].(string))
		if r.(map[string]any)["expires_at"] == nil {
			t.Fatalf("record without expires_at: %v", r)
		}
	}
	if got := strings.Join(ops, ","); got != "acquire,renew,acquire,release,acquire,revoke" {
		t.Fatalf("audit ops %s", got)
	}
	key := expect(t, "audit by key", send(t, "GET", s.url+"/v1/audit?namespace=scan&key=k2&since="+
		url.QueryEscape(s.clock.Now().Add(-time.Second).Format(time.RFC3339Nano)), ""), 200, "found")
	if n := len(key["records"].([]any)); n != 2 {
		t.Fatalf("audit of k2 since now: %d records", n)
	}
	// op, owner and order: the ops of the trail's acquires and revokes
	// of w3 and w2, newest first.
	filtered := expect(t, "audit by op and owner", send(t, "GET", s.url+"/v1/audit?namespace=scan&op=acquire,revoke&owner=w3&order=newest", ""),
		200, "found")
	ops = nil
	for _, r := range filtered["records"].([]any) {
		ops = append(ops, r.(map[string]any)["op"].(string)+" "+r.(map[string]any)["owner"].(string))
	}
	if got := strings.Join(ops, ","); got != "revoke w3,acquire w3" {
		t.Fatalf("audit op=acquire,revoke owner=w3 order=newest: %s", got)
	}
	oldest := expect(t, "audit order=oldest", send(t, "GET", s.url+"/v1/audit?namespace=scan&op=release&order=oldest", ""), 200, "found")
	if n := len(oldest["records"].([]any)); n != 1 {
		t.Fatalf("audit op=release: %d records, want 1", n)
	}
	newestPage := expect(t, "audit newest page", send(t, "GET", s.url+"/v1/audit?namespace=scan&order=newest&limit=1", ""), 200, "found")
	for _, c := range []struct{ query, msg string }{
		{"op=expire", `op: \"expire\" is not an operation the audit trail records (acquire,renew,release,revoke,prune)`},
		{"op=acquire,,renew", `op: \"\" is not an operation`},
		{"op=acquire,acquire", `op: \"acquire\" is given twice`},
		{"order=sideways", `order: \"sideways\" is neither newest nor oldest`},
		{"order=newest&follow=true", "newest first cannot be followed"},
		{"order=oldest&cursor=" + url.QueryEscape(newestPage["next_cursor"].(string)), "cursor: from a newest-first page; read it newest first"},
		{"order=newest&cursor=a1.3", "cursor: from an oldest-first page; read it oldest first"},
	} {
		r := send(t, "GET", s.url+"/v1/audit?namespace=scan&"+c.query, "")
		expect(t, "audit "+c.query, r, 400, "invalid")
		if !strings.Contains(string(r.body), c.msg) {
			t.Fatalf("audit %s: %s, want a message with %s", c.query, r.body, c.msg)
		}
	}
	expect(t, "audit key without namespace", send(t, "GET", s.url+"/v1/audit?key=k2", ""), 400, "invalid")
	expect(t, "audit bad since", send(t, "GET", s.url+"/v1/audit?since=yesterday", ""), 400, "invalid")

	expect(t, "healthz", send(t, "GET", s.url+"/healthz", ""), 200, "ok")
	expect(t, "readyz", send(t, "GET", s.url+"/readyz", ""), 200, "healthy")
	expect(t, "unknown route", send(t, "GET", s.url+"/v2/acquire", ""), 404, "invalid")
	r := send(t, "GET", s.url+"/v1/acquire", "")
	expect(t, "method", r, 405, "invalid")
	if r.header.Get("Allow") != "POST" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
}

// TestBadBodies checks that malformed, unknown and oversized input is
// refused with 400 or 413 and writes nothing.
func TestBadBodies(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for name, body := range map[string]string{
		"malformed":        `{"namespace":"ns","key":"k",`,
		"unknown field":    `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","colour":"red"}`,
		"two objects":      `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}{}`,
		"not an object":    `["ns","k"]`,
		"empty":            ``,
		"ttl number":       `{"namespace":"ns","key":"k","owner":"o","ttl":30}`,
		"bad ttl":          `{"namespace":"ns","key":"k","owner":"o","ttl":"soon"}`,
		"no ttl":           `{"namespace":"ns","key":"k","owner":"o"}`,
		"ttl too long":     `{"namespace":"ns","key":"k","owner":"o","ttl":"1000h"}`,
		"ttl of 2^64 ns":   `{"namespace":"ns","key":"k","owner":"o","ttl":"213504d"}`,
		"lock delay wraps": `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","lock_delay":"213504d"}`,
		"no owner":         `{"namespace":"ns","key":"k","ttl":"30s"}`,
		"control char":     `{"namespace":"ns","key":"k\u0000","owner":"o","ttl":"30s"}`,
		// JSON is UTF-8: a decoder would turn these into U+FFFD and write
		// a key the caller never named.
		"invalid UTF-8":   "{\"namespace\":\"ns\",\"key\":\"k\xff\",\"owner\":\"o\",\"ttl\":\"30s\"}",
		"lone surrogate":  `{"namespace":"ns","key":"k\ud800","owner":"o","ttl":"30s"}`,
		"low surrogate":   `{"namespace":"ns","key":"k","owner":"o\udc00\ud800","ttl":"30s"}`,
		"token as string": `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","token":"1"}`,
	} {
		m := expect(t, name, send(t, "POST", s.url+"/v1/acquire", body), 400, "invalid")
		if m["message"] == "" || m["lease"] != nil {
			t.Fatalf("%s: body %v", name, m)
		}
	}
	expect(t, "ids differ", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","request_id":"a"}`,
		httpapi.HeaderIdempotencyKey, "b"), 400, "invalid")
	expect(t, "bad timeout header", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`,
		httpapi.HeaderTimeout, "soon"), 400, "invalid")
	big := `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","request_id":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`
	expect(t, "too large", send(t, "POST", s.url+"/v1/acquire", big), http.StatusRequestEntityTooLarge, "invalid")
	l := expect(t, "nothing written", send(t, "GET", s.url+"/v1/leases/ns?include_expired=true", ""), 200, "found")
	if n := len(l["leases"].([]any)); n != 0 {
		t.Fatalf("refused requests wrote %d leases", n)
	}
	a := expect(t, "no audit", send(t, "GET", s.url+"/v1/audit", ""), 200, "found")
	if n := len(a["records"].([]any)); n != 0 {
		t.Fatalf("refused requests wrote %d audit records", n)
	}
}

// TestDurationAndTimeGrammar: the API takes the CLI's grammar (package
// durations): a ttl in days, since as a duration back from now, and the
// Request-Timeout header likewise.
func TestDurationAndTimeGrammar(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	acq := expect(t, "acquire ttl 1d", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"1d"}`,
		httpapi.HeaderTimeout, "5s"), 200, "acquired")
	exp, err := time.Parse(time.RFC3339Nano, acq["lease"].(map[string]any)["expires_at"].(string))
	if err != nil || !exp.Equal(s.clock.Now().Add(24*time.Hour)) {
		t.Fatalf("expires_at %v (%v), want a day after %v", exp, err, s.clock.Now())
	}
	expect(t, "acquire ttl 1h30m", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k2","owner":"o","ttl":"1h30m"}`), 200, "acquired")
	renew := fmt.Sprintf(`{"namespace":"ns","key":"k","owner":"o","token":%d,"ttl":"2d"}`, token(t, acq))
	expect(t, "renew ttl 2d", send(t, "POST", s.url+"/v1/renew", renew), 200, "renewed")
	// since is judged by the server's own clock, which the in-memory
	// store's manual clock is not: a day back from the real now reaches
	// any record stamped by the manual clock only if that is within it,
	// so only the grammar is checked here, and that nothing newer than
	// the bound is left out.
	for _, since := range []string{"1h", "2d", "15m", "0s", "2026-01-02", url.QueryEscape("2026-01-02T15:04:05Z")} {
		expect(t, "audit since="+since, send(t, "GET", s.url+"/v1/audit?namespace=ns&since="+since, ""), 200, "found")
	}
	m := expect(t, "audit since=1d", send(t, "GET", s.url+"/v1/audit?namespace=ns&since=1000d", ""), 200, "found")
	if n := len(m["records"].([]any)); n != 3 {
		t.Fatalf("audit since 1000 days back: %d records, want 3", n)
	}
	for _, bad := range []string{"-1h", "soon", "5"} {
		expect(t, "audit since="+bad, send(t, "GET", s.url+"/v1/audit?since="+bad, ""), 400, "invalid")
	}
	expect(t, "ttl without unit", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k3","owner":"o","ttl":"5"}`), 400, "invalid")
}

// TestRenewWithoutTTLKeepsIt: a renew body without ttl keeps the lease's
// own TTL, and so does the Go client's Renew with TTL 0.
func TestRenewWithoutTTLKeepsIt(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	acq := expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"20s"}`), 200, "acquired")
	ttlOf := func(m map[string]any) time.Duration {
		l := m["lease"].(map[string]any)
		renewed, _ := time.Parse(time.RFC3339Nano, l["renewed_at"].(string))
		expires, _ := time.Parse(time.RFC3339Nano, l["expires_at"].(string))
		return expires.Sub(renewed)
	}
	s.clock.Advance(5 * time.Second)
	ren := expect(t, "renew without ttl", send(t, "POST", s.url+"/v1/renew",
		fmt.Sprintf(`{"namespace":"ns","key":"k","owner":"o","token":%d}`, token(t, acq))), 200, "renewed")
	if got := ttlOf(ren); got != 20*time.Second {
		t.Fatalf("renew without ttl of a 20s lease: a %v lease", got)
	}
	rt := newClient(t, s.url, nil)
	res, err := rt.Renew(t.Context(), protocol.RenewRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", Token: token(t, acq)})
	if err != nil || res.Lease.ExpiresAt.Sub(res.Lease.RenewedAt) != 20*time.Second {
		t.Fatalf("the Go client's renew with TTL 0: %+v, %v", res.Lease, err)
	}
	// Only leaving ttl out keeps it: a ttl given as zero is refused, and
	// the lease is untouched (it was renewed, keeping its TTL).
	before := res.Lease.ExpiresAt
	s.clock.Advance(time.Second)
	for _, ttl := range []string{"0s", "0m", "0h0s"} {
		m := expect(t, "renew with ttl "+ttl, send(t, "POST", s.url+"/v1/renew",
			fmt.Sprintf(`{"namespace":"ns","key":"k","owner":"o","token":%d,"ttl":%q}`, token(t, acq), ttl)), 400, "invalid")
		if !strings.Contains(m["message"].(string), "without ttl keeps") {
			t.Fatalf("renew with ttl %s: %v, want the message to say how to keep the TTL", ttl, m)
		}
		expect(t, "renew many with ttl "+ttl, send(t, "POST", s.url+"/v1/renew-many",
			fmt.Sprintf(`{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":%d,"ttl":%q}]}`, token(t, acq), ttl)), 400, "invalid")
	}
	got, err := s.rt.Get(t.Context(), protocol.GetRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}})
	if err != nil || !got.Lease.ExpiresAt.Equal(before) {
		t.Fatalf("after refused renewals: %+v %v, want it to expire at %v still", got.Lease, err, before)
	}
}

// TestEscapedKeysRoundTrip: a surrogate pair escaped in JSON is one
// character, and an escaped backslash before "ud800" is text, not an
// escape: both are taken as written (TestBadBodies refuses half a pair).
func TestEscapedKeysRoundTrip(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	m := expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire",
		`{"namespace":"ns","key":"k\ud83d\ude00 \\ud800\u00e9","owner":"o","ttl":"30s"}`), 200, "acquired")
	if got, want := m["lease"].(map[string]any)["key"], "k\U0001F600 \\ud800é"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
	expect(t, "get", send(t, "GET", s.url+httpapi.LeasePath(protocol.Key{Namespace: "ns", Name: "k\U0001F600 \\ud800é"}), ""), 200, "found")
}

// TestJSONMemberNamesAreExact: a body names each field exactly as the API
// spells it, once. encoding/json alone matches "Owner" or "OWNER" to owner
// and keeps the last of two members of one name, so a body that a proxy
// or another parser reads as one request (the first "namespace", a field
// it does not know) was run as another.
func TestJSONMemberNamesAreExact(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, c := range []struct{ name, path, body, msg string }{
		{"owner in another case", "/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","Owner":"x"}`, `unknown field "Owner"`},
		{"name in capitals", "/v1/acquire", `{"namespace":"ns","key":"k","OWNER":"o","ttl":"30s"}`, `unknown field "OWNER"`},
		{"namespace twice", "/v1/acquire", `{"namespace":"ns","namespace":"other","key":"k","owner":"o","ttl":"30s"}`,
			`field "namespace" given twice`},
		{"renew token twice", "/v1/renew", `{"namespace":"ns","key":"k","owner":"o","token":1,"token":2}`, `field "token" given twice`},
		{"release in capitals", "/v1/release", `{"Namespace":"ns","key":"k","owner":"o","token":1}`, `unknown field "Namespace"`},
		{"revoke reason twice", "/v1/revoke", `{"namespace":"ns","key":"k","actor":"a","reason":"r","reason":"s"}`, `field "reason" given twice`},
		{"a renewal's field in another case", "/v1/renew-many", `{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1,"Token":2}]}`,
			`unknown field "renewals[0].Token"`},
		{"renewals twice", "/v1/renew-many", `{"renewals":[],"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1}]}`,
			`field "renewals" given twice`},
	} {
		r := send(t, "POST", s.url+c.path, c.body)
		m := r.obj(t)
		if r.code != 400 || m["status"] != "invalid" || !strings.Contains(m["message"].(string), c.msg) {
			t.Errorf("%s: HTTP %d %s, want 400 invalid naming %s", c.name, r.code, r.body, c.msg)
		}
	}
	a := expect(t, "no audit", send(t, "GET", s.url+"/v1/audit", ""), 200, "found")
	if n := len(a["records"].([]any)); n != 0 {
		t.Fatalf("refused requests wrote %d audit records", n)
	}
}

// TestMalformedQueriesAreRefused: a query string that does not parse (a
// bad percent escape, a semicolon) is refused on every route that reads
// one. net/http's Query drops such a pair without a word, so a list with
// ?owner=w1% listed every owner's leases and an audit read with
// ?namespace=ns%zz read every namespace's trail.
func TestMalformedQueriesAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"w2","ttl":"30s"}`), 200, "acquired")
	for _, q := range []string{
		"/v1/leases/ns?owner=w1%",
		"/v1/leases/ns?limit=1;owner=w1",
		"/v1/leases/ns/k?x%zz",
		"/v1/audit?namespace=ns%zz",
		"/v1/audit/follow?namespace=ns&key=k%",
		"/v1/namespaces?limit=%",
		"/v1/notify/ns/k?a;b",
	} {
		// The stream routes answer 200 and stream on: read only the head.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, "GET", s.url+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", q, err)
		}
		var body string
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
		}
		_ = resp.Body.Close()
		cancel()
		if resp.StatusCode != 400 || !strings.Contains(body, `"status":"invalid"`) || !strings.Contains(body, "query: ") {
			t.Errorf("GET %s: HTTP %d %s, want 400 invalid naming the query", q, resp.StatusCode, body)
		}
	}
}

// TestRepeatedHeadersAreRefused: a request gives its request id and its
// deadline once. Two Idempotency-Key headers ran under the first, while a
// proxy that keeps the last (or joins them) logged another request id;
// two Request-Timeout headers ran under the first.
func TestRepeatedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, name := range []string{httpapi.HeaderIdempotencyKey, httpapi.HeaderTimeout} {
		val := map[string][2]string{httpapi.HeaderIdempotencyKey: {"a", "b"}, httpapi.HeaderTimeout: {"5s", "1s"}}[name]
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/v1/acquire",
			strings.NewReader(`{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Close = true
		req.Header.Add(name, val[0])
		req.Header.Add(name, val[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"status":"invalid"`) || !strings.Contains(string(b), name+": given 2 times") {
			t.Errorf("two %s headers: HTTP %d %s, want 400 invalid naming the header", name, resp.StatusCode, b)
		}
	}
	a := expect(t, "no audit", send(t, "GET", s.url+"/v1/audit", ""), 200, "found")
	if n := len(a["records"].([]any)); n != 0 {
		t.Fatalf("refused requests wrote %d audit records", n)
	}
}
