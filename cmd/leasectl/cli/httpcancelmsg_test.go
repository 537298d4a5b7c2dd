package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// blackHole listens on loopback and accepts connections that it never
// answers, holding them open until the test ends. It returns the
// http:// DSN of it.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// A command against a served store that is interrupted (Ctrl-C: its
// context cancelled) while the server has not answered says it was
// cancelled, and nowhere that a deadline passed: --timeout (30s here) was
// far off. It said "cancelled by the caller before the store answered ...:
// httpapi: no answer from the server before the deadline: context
// canceled". A change (acquire) prints its timeout result, saying it was
// cancelled; a read (get) says interrupted, as every interrupted command
// does (TestInterruptedReadSaysInterrupted in cmd/leasectl).
func TestHTTPInterruptedDoesNotBlameADeadline(t *testing.T) {
	t.Parallel()
	dsn := blackHole(t)
	for _, args := range [][]string{{"get", "k"}, {"acquire", "k", "--owner", "o"}} {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(300*time.Millisecond, cancel)
		var stdout, stderr bytes.Buffer
		code := Execute(ctx, append(args, "--dsn", dsn, "--timeout", "30s", "-o", "json"), nil, &stdout, &stderr, env{}.get)
		stop.Stop()
		cancel()
		o := outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
		wantCode(t, o, ExitInterrupted)
		m := o.json(t)
		msg, _ := m["message"].(string)
		said, status := "cancelled", "timeout"
		if args[0] == "get" {
			said, status = "interrupted", StatusInterrupted
		}
		if m["status"] != status || !strings.Contains(msg, said) || strings.Contains(msg, "deadline") {
			t.Errorf("%s interrupted: status %v, message %q, want status %s, the message saying %s and naming no deadline",
				strings.Join(args, " "), m["status"], msg, status, said)
		}
	}
}
