package httpapi_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestBareNumberTTLHintIsTaken: a ttl without a unit is refused with the
// duration to write instead; that duration must itself be taken, or the
// hint sends the caller from one refusal to the next ("0": write 0s, then
// "0s is no TTL").
func TestBareNumberTTLHintIsTaken(t *testing.T) {
	s := newServer(t, nil)
	suggested := regexp.MustCompile(`write ([^ ]+) for seconds`)
	for i, ttl := range []string{"0", "-5", "30", "1e9", "0.0005"} {
		key := fmt.Sprintf("k%d", i)
		m := expect(t, "acquire ttl "+ttl, send(t, http.MethodPost, s.url+"/v1/acquire",
			`{"namespace":"ns","key":"`+key+`","owner":"w","ttl":"`+ttl+`"}`), http.StatusBadRequest, "invalid")
		msg, _ := m["message"].(string)
		if !strings.Contains(msg, "no unit") {
			t.Fatalf("acquire ttl %q: message %q, want it to say the unit is missing", ttl, msg)
		}
		if w := suggested.FindStringSubmatch(msg); w != nil {
			r := send(t, http.MethodPost, s.url+"/v1/acquire", `{"namespace":"ns","key":"`+key+`","owner":"w","ttl":"`+w[1]+`"}`)
			if r.code != http.StatusOK {
				t.Errorf("acquire ttl %q: message %q; the ttl it says to write is refused in turn: HTTP %d %s", ttl, msg, r.code, r.body)
			}
		}
	}
}
