package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// TestBodyDeclaredOverTheLimitIsAnswered413AtOnce checks that a request
// whose Content-Length is over the body limit (64 KiB) is answered 413 at
// once, as DESIGN maps a body over 64 KiB, without the server asking for
// the body (no 100 Continue to an Expect: 100-continue) nor waiting for
// it: it used to send 100 Continue, wait the body timeout for bytes it
// would refuse, and answer 408 "not received", a code and a message that
// send the client looking at its network rather than at its body's size.
func TestBodyDeclaredOverTheLimitIsAnswered413AtOnce(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, BodyTimeout: 5 * time.Second})
	for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
		head := "POST /v1/acquire HTTP/1.1\r\nHost: leasestore\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n" +
			"Authorization: Bearer " + writerToken + "\r\n" + expect + "\r\n"
		status, took := rawExchange(t, s.url, head, 0, 0, 20*time.Second)
		if !strings.HasPrefix(status, "HTTP/1.1 413") || took > 2*time.Second {
			t.Errorf("Content-Length over the limit, %q: answered %q after %v, want 413 at once", strings.TrimSpace(expect), status, took)
		}
	}
}
