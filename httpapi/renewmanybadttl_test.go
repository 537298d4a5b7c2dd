package httpapi_test

import (
	"strings"
	"testing"
)

// POST /v1/renew-many: a renewal the store refuses fails alone, but a body
// that does not decode, one renewal's ttl that does not parse included, is
// refused whole, 400 invalid, naming the renewal (/openapi.json's 400 "a
// bad ttl"; serveRenewMany's doc).
func TestRenewManyWithABadTTLIsRefusedWhole(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	body := `{"renewals":[{"namespace":"scan","key":"a","owner":"o","token":1},` +
		`{"namespace":"scan","key":"b","owner":"o","token":1,"ttl":"soon"}]}`
	r := send(t, "POST", s.url+"/v1/renew-many", body)
	m := r.obj(t)
	if msg, _ := m["message"].(string); r.code != 400 || m["status"] != "invalid" || !strings.HasPrefix(msg, "renewals[1]: ttl: ") {
		t.Fatalf("renew-many with renewal 1's ttl \"soon\": HTTP %d %v %q; want 400 invalid naming renewals[1]'s ttl", r.code, m["status"], msg)
	}
}
