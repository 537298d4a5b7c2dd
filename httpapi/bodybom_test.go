package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyWithAByteOrderMarkSaysSo checks that a JSON body that starts
// with a UTF-8 byte order mark (as some editors and Windows tools save a
// file sent with curl -d @file) is refused (400 invalid) with a message
// naming the byte order mark and the fix, not "invalid character 'ï'",
// the mark's first byte read as Latin-1, which names no character the
// sender wrote.
func TestBodyWithAByteOrderMarkSaysSo(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	m := expect(t, "acquire", send(t, http.MethodPost, s.url+"/v1/acquire", "\ufeff"+`{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`),
		http.StatusBadRequest, "invalid")
	if msg, _ := m["message"].(string); !strings.Contains(msg, "byte order mark") || strings.Contains(msg, "ï") {
		t.Errorf("body with a byte order mark: message %q, want one naming the byte order mark", msg)
	}
}
