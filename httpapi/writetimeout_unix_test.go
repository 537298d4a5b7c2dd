//go:build unix

package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// TestAnswersOfEveryRouteHaveAWriteDeadline: docs/http-api.md says each
// write to a client, an answer too, must be taken within the write timeout
// (Config.WriteTimeout) or the client is cut off. GET /openapi.json and
// GET /metrics are answered without that deadline: a client that asks
// for them (pipelined, here) and stops reading holds the connection, and
// for /openapi.json the handler in its write, for ever. The client waits
// ten write timeouts before it reads again: a server that cut it off
// closed the connection with answers unsent; one that did not answers
// every request once the client reads.
func TestAnswersOfEveryRouteHaveAWriteDeadline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path string
		n    int // enough answers to fill the client's receive and the server's send buffers (about 20 MB)
	}{{"/openapi.json", 400}, {"/metrics", 8000}} {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			t.Parallel()
			const writeTimeout = 300 * time.Millisecond
			s := newServer(t, &httpapi.Config{WriteTimeout: writeTimeout})
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			conn, err := d.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() {
				for range c.n {
					if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", c.path); err != nil {
						return
					}
				}
			}()
			time.Sleep(10 * writeTimeout) // reading nothing
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			answered := 0
			rd := bufio.NewReader(conn)
			for answered < c.n {
				line, err := rd.ReadString('\n')
				if err != nil {
					break // cut off
				}
				if strings.HasPrefix(line, "HTTP/1.1 ") {
					answered++
				}
			}
			if answered == c.n {
				t.Fatalf("GET %s: all %d pipelined answers arrived after the client read none for %v (write timeout %v): "+
					"the server never cut it off", c.path, c.n, 10*writeTimeout, writeTimeout)
			}
		})
	}
}
