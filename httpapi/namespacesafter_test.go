package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestNamespacesAfterIsValidatedAsANamespace checks that GET
// /v1/namespaces refuses an after that no namespace can be (bytes that are
// not UTF-8, a control character such as NUL, longer than a namespace may
// be) with 400 invalid naming after, as list refuses such a prefix, before
// the store sees it: PostgreSQL refuses such text (SQLSTATE 22021), which
// the server answered 503 unavailable, an outage for bad input; SQLite
// answered no namespace at all for after=%00.
func TestNamespacesAfterIsValidatedAsANamespace(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire", send(t, http.MethodPost, s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`),
		http.StatusOK, "acquired")
	for _, after := range []string{"%FF", "%00", "a%01b", strings.Repeat("n", 1000)} {
		m := expect(t, "after="+after, send(t, http.MethodGet, s.url+"/v1/namespaces?after="+after, ""), http.StatusBadRequest, "invalid")
		if msg, _ := m["message"].(string); !strings.HasPrefix(msg, "after: ") {
			t.Errorf("after=%s: message %q does not name after", after, msg)
		}
	}
	m := expect(t, "after=a", send(t, http.MethodGet, s.url+"/v1/namespaces?after=a", ""), http.StatusOK, "found")
	if ns, _ := m["namespaces"].([]any); len(ns) != 1 || ns[0] != "ns" {
		t.Errorf("after=a: namespaces %v, want [ns]", m["namespaces"])
	}
}
