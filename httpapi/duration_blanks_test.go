package httpapi_test

import (
	"strings"
	"testing"
)

// TestDurationFieldsRefuseBlanks: a duration or time written with blanks
// around it (a body's "ttl":" 30s", a query's since=%201h) is refused as
// the one grammar refuses it on the command line: 400 invalid naming the
// value to write, nothing written. It was read as if the blanks were not
// there.
func TestDurationFieldsRefuseBlanks(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, tc := range []struct {
		what, method, path, body, fix string
	}{
		{"acquire ttl", "POST", "/v1/acquire", `{"namespace":"ns","key":"k1","owner":"o","ttl":" 30s"}`, "30s"},
		{"acquire lock_delay", "POST", "/v1/acquire", `{"namespace":"ns","key":"k2","owner":"o","ttl":"30s","lock_delay":"1s "}`, "1s"},
		{"audit since", "GET", "/v1/audit?namespace=ns&since=%201h", "", "1h"},
	} {
		r := send(t, tc.method, s.url+tc.path, tc.body)
		m := r.obj(t)
		if msg, _ := m["message"].(string); r.code != 400 || m["status"] != "invalid" ||
			!strings.Contains(msg, "blank") || !strings.Contains(msg, `write "`+tc.fix+`"`) {
			t.Errorf("%s: HTTP %d status %v message %q; want HTTP 400 invalid naming the blanks and the value to write (%q)",
				tc.what, r.code, m["status"], msg, tc.fix)
		}
	}
	m := expect(t, "list", send(t, "GET", s.url+"/v1/leases/ns", ""), 200, "found")
	if n := len(m["leases"].([]any)); n != 0 {
		t.Errorf("refused requests acquired %d keys, want none", n)
	}
}
