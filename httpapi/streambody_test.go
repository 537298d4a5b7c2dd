package httpapi_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// TestStreamWithAnUnsentBodyIsRefusedAtOnce: a GET of the notification
// stream or of the audit follow stream that announces a body and does not
// send it is answered at once, 400 invalid, and its HTTP/1 connection
// closed within refusedBodyGrace, as the other GET routes answer a body
// they leave unread. A stream cannot close its connection while it lasts,
// and while a body is left unread Go's server does not watch the
// connection for the client going away: the streams take no body.
func TestStreamWithAnUnsentBodyIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t, &httpapi.Config{BodyTimeout: 6 * time.Second})
	for _, path := range []string{"/v1/notify/ns/k", "/v1/audit/follow"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = conn.SetDeadline(start.Add(15 * time.Second))
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(conn)
		status, err := rd.ReadString('\n')
		answered := time.Since(start)
		status = strings.TrimSpace(status)
		if err != nil {
			t.Errorf("GET %s with a body never sent: no answer in 15s: %v", path, err)
			conn.Close()
			continue
		}
		rest, _ := io.ReadAll(rd)
		closed := time.Since(start)
		conn.Close()
		if answered > 2*time.Second || !strings.HasPrefix(status, "HTTP/1.1 400") || closed > 2*time.Second {
			t.Errorf("GET %s with a body never sent: answered %q after %v, the connection closed after %v (the body timeout is 6s); "+
				"want 400 at once and the connection closed within half a second:\n%s",
				path, status, answered.Round(100*time.Millisecond), closed.Round(100*time.Millisecond), rest)
		}
	}
}
