package httpapi_test

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// TestListCursorResumesOnlyItsOwnList: a list's next_cursor resumes that
// list: the same namespace and filters (prefix, owner, include_expired),
// any limit. Given to another namespace's list, or with other filters, it
// is refused 400 invalid and nothing is listed; it used to be accepted and
// start the other list after the first one's last name, leaving out the
// leases before it without a word. A cursor of an earlier release (which
// carries only the name, backendkit.EncodeListCursor) still resumes any
// list, as before. The Go client, which passes cursors through, hears the
// refusal as invalid.
func TestListCursorResumesOnlyItsOwnList(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, ns := range []string{"a", "b"} {
		for i := range 4 {
			r := send(t, "POST", s.url+"/v1/acquire", fmt.Sprintf(`{"namespace":%q,"key":"k%d","owner":"o","ttl":"30s"}`, ns, i))
			expect(t, "acquire", r, 200, "acquired")
		}
	}
	first := expect(t, "list a", send(t, "GET", s.url+"/v1/leases/a?limit=2", ""), 200, "found")
	cursor, _ := first["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("list a, limit 2 of 4: no next_cursor: %v", first)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for _, l := range m["leases"].([]any) {
			out = append(out, l.(map[string]any)["key"].(string))
		}
		return out
	}
	// Its own list goes on, with any limit.
	for _, q := range []string{"", "&limit=1", "&limit=0"} {
		m := expect(t, "list a from its cursor"+q, send(t, "GET", s.url+"/v1/leases/a?cursor="+url.QueryEscape(cursor)+q, ""), 200, "found")
		if got := keys(m); len(got) == 0 || got[0] != "k2" {
			t.Fatalf("list a from its cursor%s: %v, want k2 first", q, got)
		}
	}
	// Another list refuses it.
	for _, c := range []struct{ what, path string }{
		{"another namespace", "/v1/leases/b?cursor="},
		{"another namespace, the same limit", "/v1/leases/b?limit=2&cursor="},
		{"a prefix", "/v1/leases/a?prefix=k&cursor="},
		{"an owner", "/v1/leases/a?owner=o&cursor="},
		{"include_expired", "/v1/leases/a?include_expired=true&cursor="},
	} {
		m := expect(t, "list with a's cursor, "+c.what, send(t, "GET", s.url+c.path+url.QueryEscape(cursor), ""), 400, "invalid")
		if got := keys(m); len(got) != 0 {
			t.Fatalf("list with a's cursor, %s: refused but listed %v", c.what, got)
		}
	}
	// An earlier release's cursor carries no list: it resumes any, as it did.
	old := backendkit.EncodeListCursor("k1")
	for _, ns := range []string{"a", "b"} {
		m := expect(t, "list "+ns+" from an old cursor", send(t, "GET", s.url+"/v1/leases/"+ns+"?cursor="+url.QueryEscape(old), ""), 200, "found")
		if got := keys(m); len(got) != 2 || got[0] != "k2" {
			t.Fatalf("list %s from an old cursor after k1: %v, want k2 k3", ns, got)
		}
	}
	// The Go client passes the cursor through and hears the refusal.
	rt := newClient(t, s.url, nil)
	page, err := rt.List(t.Context(), protocol.ListRequest{Namespace: "a", Limit: 2})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("client list a: %v, cursor %q", err, page.NextCursor)
	}
	res, err := rt.List(t.Context(), protocol.ListRequest{Namespace: "b", Cursor: page.NextCursor})
	if res.Status != protocol.StatusInvalid || !errors.Is(err, protocol.ErrInvalid) || len(res.Leases) != 0 {
		t.Fatalf("client list b with a's cursor: status %q, %d leases, error %v; want invalid and none", res.Status, len(res.Leases), err)
	}
	if res, err = rt.List(t.Context(), protocol.ListRequest{Namespace: "a", Cursor: page.NextCursor}); err != nil || len(res.Leases) != 2 {
		t.Fatalf("client list a from its cursor: %d leases, %v", len(res.Leases), err)
	}
}
