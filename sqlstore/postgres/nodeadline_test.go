package postgres_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// freezingProxy forwards TCP connections to upstream until freeze is
// called; from then on it forwards nothing either way and closes nothing,
// as a server that stops answering (a paused VM, a network that drops
// packets). Closing it closes every connection.
type freezingProxy struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func startFreezingProxy(t *testing.T, upstream string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go p.pipe(u, c)
			go p.pipe(c, u)
		}
	}()
	return p
}

func (p *freezingProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.frozen.Store(false)
}

// TestDirectCallWithoutDeadlineAnswersWhenTheServerStopsAnswering: the
// runtime gives every operation a deadline (protocol.DefaultTimeout when
// the caller gives none); a Backend called directly with a context that
// has none must answer as the runtime would when the server stops
// answering: by the default deadline, timeout or unavailable.
func TestDirectCallWithoutDeadlineAnswersWhenTheServerStopsAnswering(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the test DSN is no URL (%v): nothing tested", err)
	}
	p := startFreezingProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	b := openBackend(t, u.String(), nil)
	t.Cleanup(p.close) // before the backend's Close: its pool waits for the frozen connection
	k := keysIn(pgtest.Namespace())("k")
	if _, err := b.Get(ctxT(t), protocol.GetRequest{Key: k}); err != nil && protocol.StatusOf(err) != protocol.StatusNotFound {
		t.Fatalf("get through the proxy: %v", err)
	}
	p.frozen.Store(true)
	answered := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := b.Get(context.Background(), protocol.GetRequest{Key: k})
		answered <- err
	}()
	select {
	case err := <-answered:
		took := time.Since(start)
		if st := protocol.StatusOf(err); st != protocol.StatusTimeout && st != protocol.StatusUnavailable {
			t.Errorf("get without a deadline, the server not answering: %v after %v; want timeout or unavailable", err, took.Round(time.Millisecond))
		}
		if took > protocol.DefaultTimeout+3*time.Second {
			t.Errorf("get without a deadline, the server not answering: answered after %v; want by the default deadline %v",
				took.Round(time.Millisecond), protocol.DefaultTimeout)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("get without a deadline, the server not answering: no answer after 20s; want one by the default deadline %v "+
			"(protocol.DefaultTimeout), as the runtime gives", protocol.DefaultTimeout)
	}
}
