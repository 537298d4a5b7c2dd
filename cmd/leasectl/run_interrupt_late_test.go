//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lateProxy stands between leasectl and a served store. The first POST
// /v1/acquire is held before it reaches the store (arrived gets a value):
// it stays in flight while the client gives it up, and reaches the store
// (which commits it whatever the client does) only after another request
// of the client (a get of the key, or the acquire sent again) has been
// answered since it gave it up, or after fallback.
// committed is closed when the store answered it. Every other request
// passes.
type lateProxy struct {
	url       string
	arrived   chan struct{}
	committed chan struct{}
	answer    atomic.Value // string: the store's answer to the late acquire
}

func newLateProxy(t *testing.T, storeURL string, fallback time.Duration) *lateProxy {
	t.Helper()
	rp, transport := reverseProxy(t, storeURL)
	lp := &lateProxy{arrived: make(chan struct{}, 1), committed: make(chan struct{})}
	var taken, abandoned atomic.Bool
	gotRead := make(chan struct{})
	var readOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/acquire" || !taken.CompareAndSwap(false, true) {
			rp.ServeHTTP(w, r)
			if abandoned.Load() {
				readOnce.Do(func() { close(gotRead) })
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		lp.arrived <- struct{}{}
		<-r.Context().Done() // the client gave it up: it is still on its way
		abandoned.Store(true)
		select {
		case <-gotRead:
		case <-time.After(fallback):
		}
		req, _ := http.NewRequestWithContext(context.Background(), r.Method, storeURL+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := transport.RoundTrip(req)
		if err == nil {
			answer, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			lp.answer.Store(string(answer))
		} else {
			lp.answer.Store(err.Error())
		}
		close(lp.committed)
	}))
	t.Cleanup(srv.Close)
	lp.url = srv.URL
	return lp
}

// TestRunInterruptedAcquireLandingAfterTheReadIsReleased: Ctrl-C cuts off
// run's acquire while it is still on its way to the store (not yet
// committed), and it lands after run's next request was answered. When
// undoAcquire read the key first (68afd03), it saw the key free,
// concluded "the acquire holds nothing" and sent nothing more; the
// cut-off acquire then landed and took the key: a lease of --owner w with
// nobody under it, held for the TTL (1m) and then its lock-delay (1m).
// DESIGN.md: an interrupt before CMD started "releases the lease the
// acquire took". Sending the acquire again under its request id makes the
// late copy a replay, which takes nothing.
func TestRunInterruptedAcquireLandingAfterTheReadIsReleased(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	if r := direct.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	srv := startServe(t, dir, direct.dsn, nil)
	lp := newLateProxy(t, srv.url, 15*time.Second)
	p := (leasectl{dir: dir, dsn: lp.url}).start(t, "run", "late", "--owner", "w", "--ttl", "1m", "--lock-delay", "1m",
		"--", "sh", "-c", "echo ran")
	select {
	case <-lp.arrived:
	case <-time.After(time.Minute):
		t.Fatalf("the acquire never came\n%s", p.output())
	}
	if err := p.signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 130 || strings.Contains(p.stdout.String(), "ran") {
		t.Fatalf("run interrupted before its command started: exit %d, want 130 and the command not run\n%s", code, p.output())
	}
	select {
	case <-lp.committed:
	case <-time.After(time.Minute):
		t.Fatalf("the late acquire never reached the store")
	}
	if r := direct.run(t, "get", "late", "-o", "json"); r.code != 4 || !strings.Contains(r.stdout, `"lease":null`) {
		t.Errorf("run interrupted while its acquire was on its way, which landed after run's next request was answered: the key is "+
			"held with nobody under it (get: exit %d, want 4 with no lease): %s\nthe late acquire's answer: %v\nrun's output:\n%s",
			r.code, strings.TrimSpace(r.stdout), lp.answer.Load(), p.output())
	}
}
