package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A Request-Timeout longer than the server's maximum is cut to it
// (Config.MaxTimeout, docs/http-api.md, the openapi header): one past
// what a Go duration holds ("200000d", about 548 years) is longer still,
// and was refused 400 as "not a positive duration", which it is. A
// negative one stays refused.
func TestRequestTimeoutPastDurationRangeIsCut(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, v := range []string{"200000d", "99999999999h", "18446744073709551616d"} {
		expect(t, "Request-Timeout "+v, send(t, "GET", s.url+"/v1/leases/ns/k", "", httpapi.HeaderTimeout, v), 404, "not_found")
	}
	m := expect(t, "Request-Timeout -200000d", send(t, "GET", s.url+"/v1/leases/ns/k", "", httpapi.HeaderTimeout, "-200000d"),
		400, "invalid")
	if msg, _ := m["message"].(string); !strings.Contains(msg, httpapi.HeaderTimeout) {
		t.Fatalf("message %q does not name %s", msg, httpapi.HeaderTimeout)
	}
}
