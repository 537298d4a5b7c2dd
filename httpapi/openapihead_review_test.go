package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// /openapi.json must be true to the implementation, every route and
// method: a route's 405 names in Allow the methods it takes, and each of
// them must be an operation of its path in the document. The GET routes
// take HEAD too (answered as GET, without the body), which the document
// describes for no path: a client or gateway generated from it does not
// know the server answers HEAD.
func TestOpenAPIDescribesEveryMethodTheRoutesTake(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(send(t, "GET", s.url+"/openapi.json", "").body), &doc); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for path, item := range doc.Paths {
		concrete := strings.NewReplacer("{namespace}", "scan", "{key}", "k").Replace(path)
		r := send(t, "DELETE", s.url+concrete, "")
		if r.code != http.StatusMethodNotAllowed {
			t.Fatalf("DELETE %s: HTTP %d, want 405", concrete, r.code)
		}
		for m := range strings.SplitSeq(r.header.Get("Allow"), ",") {
			m = strings.ToLower(strings.TrimSpace(m))
			if _, ok := item[m]; !ok {
				missing = append(missing, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("the server takes %d methods that /openapi.json does not describe: %s", len(missing), strings.Join(missing, ", "))
	}
}
