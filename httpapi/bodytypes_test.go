package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyOfTheWrongJSONTypeIsNamedInJSONTerms checks that a body, or a
// field, of the wrong JSON type is refused (400 invalid) with a message in
// the API's terms (an object, an integer, a string), naming the field, and
// never the Go type the server decodes into (httpapi.acquireBody, int64),
// which the client cannot know nor act on.
func TestBodyOfTheWrongJSONTypeIsNamedInJSONTerms(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/acquire", `[1,2]`, "want a JSON object, got array"},
		{"/v1/acquire", `"acquire"`, "want a JSON object, got string"},
		{"/v1/renew-many", `{"renewals":[1]}`, `field "renewals": want a JSON object, got number`},
		{"/v1/renew-many", `{"renewals":{}}`, `field "renewals": want a JSON array, got object`},
		{"/v1/renew", `{"namespace":"ns","key":"k","owner":"o","token":"1"}`, `field "token": want a JSON integer, got string`},
		{"/v1/release", `{"namespace":"ns","key":"k","owner":"o","token":1.5}`, `field "token": want a JSON integer, got number 1.5`},
		{"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":30}`, `field "ttl": want a JSON string, got number`},
	} {
		m := expect(t, tc.path+" "+tc.body, send(t, http.MethodPost, s.url+tc.path, tc.body), http.StatusBadRequest, "invalid")
		msg, _ := m["message"].(string)
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "httpapi.") || strings.Contains(msg, "int64") {
			t.Errorf("%s %s: message %q, want one saying %q (in JSON's terms, no Go type)", tc.path, tc.body, msg, tc.want)
		}
	}
}
