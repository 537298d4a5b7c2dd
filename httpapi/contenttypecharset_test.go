package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyInAnotherCharsetIsRefused: JSON is UTF-8, and the server reads
// every body so. A body its sender declares in another charset
// (application/json; charset=iso-8859-1) was read as UTF-8 all the same:
// the Latin-1 bytes of "Ã©" are the UTF-8 of "é", so the key the server
// acquired was one its sender never wrote. Such a body is refused, 415
// invalid, naming the charset, and nothing is written; charset=utf-8 (any
// case, quoted or not) is taken.
func TestBodyInAnotherCharsetIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	// "Ã©" in Latin-1: the bytes C3 A9, which UTF-8 reads as "é".
	acquire := "{\"namespace\":\"ns\",\"key\":\"\xc3\xa9\",\"owner\":\"o\",\"ttl\":\"30s\"}"
	for _, cs := range []string{"iso-8859-1", "windows-1252", "UTF-16", "latin1"} {
		ct := "application/json; charset=" + cs
		m := expect(t, "acquire as "+ct, send(t, http.MethodPost, s.url+"/v1/acquire", acquire, "Content-Type", ct),
			http.StatusUnsupportedMediaType, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, cs) || !strings.Contains(msg, "UTF-8") {
			t.Errorf("acquire as %s: message %q names neither the charset nor UTF-8", ct, msg)
		}
		expect(t, "get after acquire as "+ct, send(t, http.MethodGet, s.url+"/v1/leases/ns/%C3%A9", ""), http.StatusNotFound, "not_found")
	}
	for i, ct := range []string{"application/json; charset=UTF-8", `application/json; charset="utf-8"`, "application/json;charset=utf-8"} {
		body := "{\"namespace\":\"ns\",\"key\":\"k" + string(rune('0'+i)) + "\",\"owner\":\"o\",\"ttl\":\"30s\"}"
		expect(t, "acquire as "+ct, send(t, http.MethodPost, s.url+"/v1/acquire", body, "Content-Type", ct), http.StatusOK, "acquired")
	}
}
