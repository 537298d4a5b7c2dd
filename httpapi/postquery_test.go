package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPostRoutesRefuseAQueryString checks that a POST route, which reads
// its parameters from the JSON body only, refuses a query string (400
// invalid, naming the body as the place) and runs nothing, as the GET
// routes refuse a parameter they do not know: a client that writes
// ?ttl=1h or ?request_id=... on a renew or an acquire believes it sent
// them, and the server would otherwise run the request without them (a
// renewal keeping the old TTL, an acquire under a request id of its own).
func TestPostRoutesRefuseAQueryString(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	acq := `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`
	for _, tc := range []struct{ path, body string }{
		{"/v1/acquire?request_id=job-1", acq},
		{"/v1/renew?ttl=1h", `{"namespace":"ns","key":"k","owner":"o","token":1}`},
		{"/v1/release?x=1", `{"namespace":"ns","key":"k","owner":"o","token":1}`},
		{"/v1/revoke?reason=r", `{"namespace":"ns","key":"k","actor":"a","reason":"r"}`},
		{"/v1/renew-many?ttl=1h", `{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1}]}`},
	} {
		m := expect(t, "POST "+tc.path, send(t, http.MethodPost, s.url+tc.path, tc.body), http.StatusBadRequest, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, "query") || !strings.Contains(msg, "body") {
			t.Errorf("POST %s: message %q does not say the parameters go in the JSON body, not the query", tc.path, msg)
		}
	}
	expect(t, "get after the refused acquire", send(t, http.MethodGet, s.url+"/v1/leases/ns/k", ""), http.StatusNotFound, "not_found")
}
