package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// The empty-namespace fix (a change in namespace "" is the store's 400
// invalid for every token, a narrow one too) covers /v1/acquire, /renew
// and /release but not POST /v1/renew-many, the same renewals in bulk:
// there a token of glob scan* is refused 403, the whole request, "in
// every namespace at once", where the admin token gets the renewal's own
// invalid result.
func TestRenewManyWithAnEmptyNamespaceIsNoForbiddenRequestForANarrowToken(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	const body = `{"renewals":[{"namespace":"","key":"k","owner":"o","token":1}]}`
	admin := send(t, "POST", s.url+"/v1/renew-many", body, "Authorization", "Bearer "+adminToken)
	r := send(t, "POST", s.url+"/v1/renew-many", body, "Authorization", "Bearer "+writerToken)
	m := r.obj(t)
	if admin.code == 403 || r.code != admin.code || m["status"] != admin.obj(t)["status"] {
		t.Fatalf("/v1/renew-many of one renewal with an empty namespace: writer token of glob scan*: HTTP %d %v %q; "+
			"admin token of glob *: HTTP %d %v; want the narrow token answered as the admin is (the empty namespace is invalid "+
			"input, as /v1/renew answers it 400 for both), not refused 403", r.code, m["status"], m["message"], admin.code, admin.obj(t)["status"])
	}
}
