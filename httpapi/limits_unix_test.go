//go:build unix

package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestAStreamItsClientDoesNotReadIsCutOff: a follow stream whose client
// stopped reading, and whose token a reload then removed, ended within
// the write timeout and gave its place back (it held the server's only
// stream slot for ever: a write blocked on the full socket never saw the
// reload). The client's receive buffer is small, and enough records are
// written to fill it and the server's send buffer.
func TestAStreamItsClientDoesNotReadIsCutOff(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[httpapi.Tokens]
	current.Store(mustTokens(t))
	s := newServer(t, &httpapi.Config{Tokens: current.Load, MaxStreams: 1, WriteTimeout: 300 * time.Millisecond})
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/audit/follow?namespace=scan HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", readerToken)
	head := make([]byte, 512)
	if _, err := conn.Read(head); err != nil || !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		t.Fatalf("follow: %v %q", err, head)
	}
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	for i := range 20000 { // the stream is never read again
		k := protocol.Key{Namespace: "scan", Name: fmt.Sprintf("k-%d", i)}
		res, err := s.rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w", Token: res.Lease.Token}); err != nil {
			t.Fatal(err)
		}
	}
	next, err := httpapi.ParseTokens(strings.NewReader(adminToken + " admin *\n")) // the reader's token removed
	if err != nil {
		t.Fatal(err)
	}
	current.Store(next)
	s.h.TokensReloaded()
	deadline := time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/audit/follow?namespace=scan", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(rctx))
		code := 0
		if err == nil {
			code = resp.StatusCode
			_ = resp.Body.Close()
		}
		cancel()
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new stream still answered %d (%v) 5s after the reload: the unread stream holds the only slot", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
