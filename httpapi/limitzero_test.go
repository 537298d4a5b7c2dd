package httpapi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestLimitZeroIsTheDefaultOnEveryPagedRoute: the three routes that take
// limit (list, audit, namespaces) read limit=0, and an empty limit=, as
// no limit: the default page (docs/http-api.md, openapi.json: "0 or
// absent: 100" for list and audit). GET /v1/namespaces refused both 400
// ("limit: 0 is outside [1, 1000]") where list and audit answered. Limits
// outside [0, 1000] stay refused on each. The Go client keeps
// NamespaceLister's rule (limit 1 to protocol.MaxListLimit), as every
// backend does, without asking the server.
func TestLimitZeroIsTheDefaultOnEveryPagedRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, ns := range []string{"a", "b"} {
		r := send(t, "POST", s.url+"/v1/acquire", fmt.Sprintf(`{"namespace":%q,"key":"k","owner":"o","ttl":"30s"}`, ns))
		expect(t, "acquire", r, 200, "acquired")
	}
	for _, route := range []string{"/v1/leases/a", "/v1/audit", "/v1/namespaces"} {
		for _, q := range []string{"?limit=0", "?limit="} {
			expect(t, "GET "+route+q, send(t, "GET", s.url+route+q, ""), 200, "found")
		}
		for _, q := range []string{"?limit=-1", "?limit=1001"} {
			expect(t, "GET "+route+q, send(t, "GET", s.url+route+q, ""), 400, "invalid")
		}
	}
	m := expect(t, "namespaces, limit 0", send(t, "GET", s.url+"/v1/namespaces?limit=0", ""), 200, "found")
	if got := fmt.Sprint(m["namespaces"]); got != "[a b]" {
		t.Fatalf("namespaces, limit 0: %s, want [a b]", got)
	}
	c, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	for _, limit := range []int{0, -1, protocol.MaxListLimit + 1} {
		if got, err := c.Namespaces(t.Context(), "", limit); !errors.Is(err, protocol.ErrInvalid) {
			t.Fatalf("client Namespaces, limit %d: %v, %v; want invalid (NamespaceLister takes 1 to %d)", limit, got, err, protocol.MaxListLimit)
		}
	}
	if got, err := c.Namespaces(t.Context(), "", 1); err != nil || fmt.Sprint(got) != "[a]" {
		t.Fatalf("client Namespaces, limit 1: %v, %v", got, err)
	}
}
