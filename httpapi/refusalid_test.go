package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// TestRefusalsCarryTheBodysRequestID: an answer carries the request id
// the request gave, refusals too (a result's request_id; the Python
// client's LeaseError and leasectl report it). The store's refusals do
// (ttl "-1s": request_id echoed), but those of the handler's own decoding
// (a TTL of "0s" or without a unit, a lock_delay that does not parse, a
// Request-Timeout that does not) answered request_id "" although the body
// named one.
func TestRefusalsCarryTheBodysRequestID(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, c := range []struct {
		what, path, body string
		headers          []string
	}{
		{"acquire, ttl -1s (the store refuses it)", "/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"-1s","request_id":"rid-1"}`, nil},
		{"acquire, ttl 0s", "/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"0s","request_id":"rid-1"}`, nil},
		{"acquire, ttl without a unit", "/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30","request_id":"rid-1"}`, nil},
		{"acquire, lock_delay that does not parse", "/v1/acquire",
			`{"namespace":"ns","key":"k","owner":"o","ttl":"30s","lock_delay":"x","request_id":"rid-1"}`, nil},
		{"renew, ttl 0s", "/v1/renew", `{"namespace":"ns","key":"k","owner":"o","token":1,"ttl":"0s","request_id":"rid-1"}`, nil},
		{"release, Request-Timeout that does not parse", "/v1/release",
			`{"namespace":"ns","key":"k","owner":"o","token":1,"request_id":"rid-1"}`, []string{"Request-Timeout", "soon"}},
	} {
		m := expect(t, c.what, send(t, "POST", s.url+c.path, c.body, c.headers...), 400, "invalid")
		if m["request_id"] != "rid-1" {
			t.Errorf("%s: 400 invalid with request_id %q, want the body's \"rid-1\"", c.what, m["request_id"])
		}
	}
}

// TestForbiddenNamespaceCarriesTheBodysRequestID: a change refused 403
// for its namespace, which is known only once the body is read, carries
// the body's request id as the other refusals after the body do (the
// access log had it; the answer said "").
func TestForbiddenNamespaceCarriesTheBodysRequestID(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	m := expect(t, "writer, other namespace", send(t, "POST", s.url+"/v1/acquire",
		`{"namespace":"billing","key":"k","owner":"o","ttl":"30s","request_id":"rid-2"}`,
		"Authorization", "Bearer "+writerToken), 403, "forbidden")
	if m["request_id"] != "rid-2" {
		t.Errorf("403 for the namespace: request_id %q, want the body's \"rid-2\"", m["request_id"])
	}
}
