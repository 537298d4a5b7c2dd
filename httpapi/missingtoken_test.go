package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRenewAndReleaseWithoutATokenSayItIsRequired checks that a renew or
// release body without "token" is refused (400 invalid) with a message
// saying the field is required, as an acquire without "ttl" is, not that
// the token "must be positive, got 0": the client sent no 0, and that
// message sends it looking for a zero in its own code.
func TestRenewAndReleaseWithoutATokenSayItIsRequired(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	noToken := `{"namespace":"ns","key":"k","owner":"o"}`
	for _, tc := range []struct{ path, body string }{
		{"/v1/renew", noToken},
		{"/v1/release", noToken},
	} {
		m := expect(t, tc.path, send(t, http.MethodPost, s.url+tc.path, tc.body), http.StatusBadRequest, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, "token: required") || strings.Contains(msg, "got 0") {
			t.Errorf("%s without token: message %q, want one saying token: required", tc.path, msg)
		}
	}
	m := expect(t, "renew-many", send(t, http.MethodPost, s.url+"/v1/renew-many", `{"renewals":[`+noToken+`]}`), http.StatusOK, "found")
	res := m["results"].([]any)[0].(map[string]any)
	if msg, _ := res["message"].(string); res["status"] != "invalid" || !strings.Contains(msg, "token: required") {
		t.Errorf("renew-many without token: result %v, want invalid saying token: required", res)
	}
	// A token given as 0 is still refused as not positive.
	m = expect(t, "renew token 0", send(t, http.MethodPost, s.url+"/v1/renew", `{"namespace":"ns","key":"k","owner":"o","token":0}`),
		http.StatusBadRequest, "invalid")
	if msg, _ := m["message"].(string); !strings.Contains(msg, "must be positive, got 0") {
		t.Errorf("renew with token 0: message %q", msg)
	}
}
