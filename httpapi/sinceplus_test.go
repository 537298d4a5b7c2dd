package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSinceWithAnUnescapedPlusNamesTheEscape checks that an RFC 3339 since
// whose offset's + was sent unescaped (a query string reads + as a space,
// so ?since=2030-01-02T00:00:00+01:00 arrives as "...00:00:00 01:00") is
// refused with a message that names the fix, %2B, on GET /v1/audit and on
// the follow stream alike: the time is one the CLI takes as it is, and
// the generic "is not ... an RFC 3339 time" leaves its sender staring at
// a valid RFC 3339 time.
func TestSinceWithAnUnescapedPlusNamesTheEscape(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, path := range []string{"/v1/audit?namespace=ns&since=", "/v1/audit/follow?namespace=ns&since="} {
		m := expect(t, path, send(t, http.MethodGet, s.url+path+"2030-01-02T00:00:00+01:00", ""), http.StatusBadRequest, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, "%2B") {
			t.Errorf("%s with an unescaped +: message %q does not name %%2B", path, msg)
		}
	}
	// Escaped, the same time is taken.
	expect(t, "escaped", send(t, http.MethodGet, s.url+"/v1/audit?namespace=ns&since=2030-01-02T00:00:00%2B01:00", ""), http.StatusOK, "found")
}
