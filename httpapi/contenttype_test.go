package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyThatIsNotJSONByItsContentTypeIsRefused: a POST route's body is
// JSON. A request whose Content-Type names another media type (a form, as
// curl -d and an HTML form send; text/plain) is refused, 415 invalid,
// before its body is read, the message naming Content-Type:
// application/json, and nothing is written; the server ran such a body as
// JSON. A body sent as application/json (any case, with a charset), or
// without a Content-Type, is taken as before.
func TestBodyThatIsNotJSONByItsContentTypeIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	acquire := `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/json", "application/jsonx"} {
		m := expect(t, "acquire as "+ct, send(t, http.MethodPost, s.url+"/v1/acquire", acquire, "Content-Type", ct),
			http.StatusUnsupportedMediaType, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, "Content-Type: application/json") {
			t.Errorf("acquire as %s: message %q does not name Content-Type: application/json", ct, msg)
		}
		expect(t, "get after acquire as "+ct, send(t, http.MethodGet, s.url+"/v1/leases/ns/k", ""), http.StatusNotFound, "not_found")
	}
	for path, body := range map[string]string{
		"/v1/renew":      `{"namespace":"ns","key":"k","owner":"o","token":1}`,
		"/v1/release":    `{"namespace":"ns","key":"k","owner":"o","token":1}`,
		"/v1/revoke":     `{"namespace":"ns","key":"k","actor":"a","reason":"r"}`,
		"/v1/renew-many": `{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1}]}`,
	} {
		expect(t, path+" as text/plain", send(t, http.MethodPost, s.url+path, body, "Content-Type", "text/plain"),
			http.StatusUnsupportedMediaType, "invalid")
	}
	expect(t, "acquire as Application/JSON; charset=utf-8", send(t, http.MethodPost, s.url+"/v1/acquire", acquire,
		"Content-Type", "Application/JSON; charset=utf-8"), http.StatusOK, "acquired")
	expect(t, "acquire without a Content-Type", send(t, http.MethodPost, s.url+"/v1/acquire",
		`{"namespace":"ns","key":"k2","owner":"o","ttl":"30s"}`), http.StatusOK, "acquired")
}
