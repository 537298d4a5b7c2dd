package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestLimitWrittenOtherwiseThanAsDigitsIsRefused: the limit of list, audit
// and namespaces is an integer written as the API writes one (decimal
// digits: 5, 0, 100). Another spelling of a number (%2B5, 05, -0, a blank
// around it, whether sent as %20 or as a bare + that a query string reads
// as a space) is refused, 400 invalid, the message naming how to write it;
// strconv.Atoi took +5, 05 and -0 as 5, 5 and 0. Forms that are no
// integer at all (0x5, 5.0, 1e1) stay refused.
func TestLimitWrittenOtherwiseThanAsDigitsIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`), 200, "acquired")
	for _, route := range []string{"/v1/leases/ns?limit=", "/v1/audit?namespace=ns&limit=", "/v1/namespaces?limit="} {
		for _, c := range []struct{ limit, want string }{
			{"%2B5", "limit=5"}, {"05", "limit=5"}, {"-0", "limit=0"}, {"%205", "limit=5"}, {"5%20", "limit=5"},
			{"+5", "limit=5"}, {"0x5", "decimal digits"}, {"5.0", "decimal digits"}, {"1e1", "decimal digits"},
		} {
			m := expect(t, route+c.limit, send(t, http.MethodGet, s.url+route+c.limit, ""), http.StatusBadRequest, "invalid")
			if msg, _ := m["message"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("GET %s%s: message %q does not say %q", route, c.limit, msg, c.want)
			}
		}
		expect(t, route+"5", send(t, http.MethodGet, s.url+route+"5", ""), http.StatusOK, "found")
	}
}
