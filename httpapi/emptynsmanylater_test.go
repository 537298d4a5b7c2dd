package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A renewal of POST /v1/renew-many with an empty namespace is invalid
// input, answered in its own result, wherever it stands in the request:
// after one in a namespace the token may renew in, it is no request "in
// every namespace at once" either, and the other renewal gets its own
// result; a renewal in a namespace the token may not renew in still gets
// the whole request refused 403.
func TestRenewManyWithAnEmptyNamespaceAfterAnotherIsAnsweredInItsResult(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	const body = `{"renewals":[{"namespace":"scan1","key":"k","owner":"o","token":1},{"namespace":"","key":"k","owner":"o","token":1}]}`
	r := send(t, "POST", s.url+"/v1/renew-many", body, "Authorization", "Bearer "+writerToken)
	m := r.obj(t)
	results, _ := m["results"].([]any)
	if r.code != 200 || len(results) != 2 {
		t.Fatalf("/v1/renew-many of a renewal in scan1 then one in namespace \"\", writer token of glob scan*: HTTP %d %v %q; "+
			"want 200 with two results", r.code, m["status"], m["message"])
	}
	first, _ := results[0].(map[string]any)
	second, _ := results[1].(map[string]any)
	if first["status"] != "not_found" || second["status"] != "invalid" {
		t.Fatalf("/v1/renew-many of a renewal in scan1 then one in namespace \"\": results %v; want not_found (no such lease), then invalid", results)
	}
	const other = `{"renewals":[{"namespace":"","key":"k","owner":"o","token":1},{"namespace":"billing","key":"k","owner":"o","token":1}]}`
	r = send(t, "POST", s.url+"/v1/renew-many", other, "Authorization", "Bearer "+writerToken)
	expect(t, "/v1/renew-many of a renewal in \"\" then one in billing, writer token of glob scan*", r, 403, "forbidden")
}
