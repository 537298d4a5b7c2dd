package httpapi_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// /openapi.json gives GET /v1/audit the Idempotency-Key header, "the
// request id", of schema RequestID (1 to 128 characters), as it gives get
// and list, which read it and refuse one the schema refuses (400). The
// audit route reads no request id: it takes any header there, so the
// document says of it what is not true (and an audit read has no request
// id to carry: the parameter does not belong to the route).
func TestAuditRouteReadsTheIdempotencyKeyItsDocumentGivesIt(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	// Either fix is true to the document: the parameter gone from the
	// route's, or the route reading it.
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(send(t, "GET", s.url+"/openapi.json", "").body), &doc); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(doc.Paths["/v1/audit"]["get"].Parameters, func(p map[string]any) bool {
		return p["$ref"] == "#/components/parameters/IdempotencyKey" || p["name"] == "Idempotency-Key"
	}) {
		return
	}
	tooLong := strings.Repeat("i", 129)
	list := send(t, "GET", s.url+"/v1/leases/scan", "", "Idempotency-Key", tooLong)
	expect(t, "list with a 129-character Idempotency-Key", list, 400, "invalid")
	r := send(t, "GET", s.url+"/v1/audit?namespace=scan", "", "Idempotency-Key", tooLong)
	if m := r.obj(t); r.code != 400 {
		t.Fatalf("GET /v1/audit with a 129-character Idempotency-Key (/openapi.json: schema RequestID, at most 128): HTTP %d %v; "+
			"want 400 invalid as list answers (%q), or the parameter gone from the route's document", r.code, m["status"], list.obj(t)["message"])
	}
}
