package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// POST /v1/acquire with a lock_delay under the microsecond, which the
// store would keep as none, is refused as invalid (400) naming the 1µs
// resolution, and takes nothing.
func TestAcquireRefusesASubMicrosecondLockDelay(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	r := send(t, http.MethodPost, s.url+"/v1/acquire",
		`{"namespace":"ns","key":"job","owner":"w1","ttl":"1m","lock_delay":"500ns"}`)
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, "1µs") {
		t.Errorf("acquire with lock_delay 500ns: %d %s; want 400 invalid naming the 1µs resolution", r.code, r.body)
	}
	if g := send(t, http.MethodGet, s.url+"/v1/leases/ns/job", ""); g.code != http.StatusNotFound {
		t.Errorf("after the refused acquire, get answered %d %s: want 404, nothing taken", g.code, g.body)
	}
}
