package httpapi_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// freezingProxy forwards TCP connections to a server until freeze: from
// then on the connections open drop every byte either way and stay open
// (a server host that died, a route gone: nothing answers and nothing
// closes), while connections opened later forward as before (the server
// back behind the same address).
type freezingProxy struct {
	addr string
	mu   sync.Mutex
	open []*atomic.Bool // per connection: frozen
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
	})
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.forward(c, target, done) })
		}
	}()
	return p
}

// forward copies c to and from a connection to target until either ends
// or done is closed, dropping the bytes once frozen.
func (p *freezingProxy) forward(c net.Conn, target string, done <-chan struct{}) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	frozen := new(atomic.Bool)
	p.mu.Lock()
	p.open = append(p.open, frozen)
	p.mu.Unlock()
	pipe := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	ended := make(chan struct{}, 2)
	go func() { pipe(s, c); ended <- struct{}{} }()
	go func() { pipe(c, s); ended <- struct{}{} }()
	select {
	case <-ended:
	case <-done:
	}
	_ = c.Close()
	_ = s.Close()
	<-ended
}

// freeze makes every connection open now drop its bytes.
func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.open {
		f.Store(true)
	}
}

// A Held over HTTPS keeps its lease when the connection its requests
// share (HTTP/2 multiplexes them over one) goes dead without closing,
// the server answering again over a new one: the client finds the
// connection dead and renews over a new one while the lease has time
// left, instead of sending each renewal into the dead connection until
// the lease runs out. Hold's defaults (a renewal every third of the TTL,
// each bounded by that).
func TestHoldOverHTTPSOutlivesADeadConnection(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	p := newFreezingProxy(t, u.Host)
	c, err := httpapi.NewClient("https://"+p.addr+"?cacert="+url.QueryEscape(s.caFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(c, nil)
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	ctx := t.Context()
	h, err := protocol.Hold(ctx, store, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "w1",
		TTL: 9 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.http2.Load() == 0 {
		t.Fatal("the acquire did not come over HTTP/2")
	}
	frozeAt := time.Now()
	p.freeze()
	for !h.Lease().RenewedAt.After(frozeAt) {
		select {
		case <-h.Context().Done():
			cause := context.Cause(h.Context())
			t.Fatalf("lease lost after the connection went dead, no renewal having gone over a new one: %s",
				strings.TrimSpace(cause.Error()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release after the renewal over a new connection: %v", err)
	}
}
