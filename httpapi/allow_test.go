package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMethodNotAllowedListsEveryMethodTheRouteTakes: a 405's Allow header
// lists the methods the route takes (RFC 9110, 15.5.6: "MUST generate an
// Allow header field ... containing a list of the target resource's
// currently supported methods"). The GET routes answer HEAD too (the
// notification and follow streams do not), but their 405 said Allow: GET,
// so a client that reads Allow never learns it may ask HEAD.
func TestMethodNotAllowedListsEveryMethodTheRouteTakes(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, path := range []string{"/v1/leases/ns/k", "/v1/leases/ns", "/v1/audit", "/v1/namespaces", "/healthz", "/readyz"} {
		if r := send(t, http.MethodHead, s.url+path, ""); r.code == http.StatusMethodNotAllowed {
			t.Fatalf("HEAD %s: 405: the route does not take HEAD after all", path)
		}
		r := send(t, http.MethodDelete, s.url+path, "")
		if r.code != http.StatusMethodNotAllowed {
			t.Fatalf("DELETE %s: HTTP %d, want 405", path, r.code)
		}
		allow := map[string]bool{}
		for m := range strings.SplitSeq(r.header.Get("Allow"), ",") {
			allow[strings.TrimSpace(m)] = true
		}
		if !allow[http.MethodGet] || !allow[http.MethodHead] {
			t.Errorf("DELETE %s: 405 with Allow %q, want GET and HEAD (the route answers both)", path, r.header.Get("Allow"))
		}
	}
}
