package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A change with an empty namespace is invalid input: DESIGN.md's HTTP API
// answers it 400 invalid ("namespace: must not be empty"), as it does for
// an admin token of glob *. A token limited to some namespaces gets 403
// instead, whose message sends its holder for a token of glob * "to acquire
// in every namespace at once", which no acquire does and which would only
// be refused 400 in turn.
func TestChangeWithAnEmptyNamespaceIsInvalidForANarrowToken(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for _, c := range []struct{ path, body string }{
		{"/v1/acquire", `{"namespace":"","key":"k","owner":"o","ttl":"30s"}`},
		{"/v1/renew", `{"namespace":"","key":"k","owner":"o","token":1}`},
		{"/v1/release", `{"namespace":"","key":"k","owner":"o","token":1}`},
	} {
		admin := send(t, "POST", s.url+c.path, c.body, "Authorization", "Bearer "+adminToken)
		expect(t, c.path+" with an empty namespace, admin token of glob *", admin, 400, "invalid")
		r := send(t, "POST", s.url+c.path, c.body, "Authorization", "Bearer "+writerToken)
		m := r.obj(t)
		if r.code != 400 || m["status"] != "invalid" {
			t.Fatalf("%s with an empty namespace, writer token of glob scan*: HTTP %d %v %q; want HTTP 400 invalid, "+
				"as for the admin token (%q)", c.path, r.code, m["status"], m["message"], admin.obj(t)["message"])
		}
	}
}
