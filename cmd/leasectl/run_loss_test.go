//go:build unix

package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRunReleasesAfterALossByTheLocalClock: when run's renewals get no
// answer (here: each reaches the store and commits, and the connection
// drops before the answer, as in a network blip between run and the
// store), run gives the lease up by its local clock, stops CMD and exits
// 6. It must then release the lease, which the store may still hold (the
// proxy passes releases), once CMD is gone: it did not, and the lease the
// renewals kept stayed held until its TTL ran out, and then its
// lock-delay kept the key from every other run for D more. The scheduler
// releases a lease it lost by the local clock once its handler returned
// ("it may still be the worker's"); Held.Release now does the same.
func TestRunReleasesAfterALossByTheLocalClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	srv := startServe(t, dir, direct.dsn, nil)
	rp, transport := reverseProxy(t, srv.url)
	var drop atomic.Bool
	var dropped atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !(drop.Load() && r.Method == http.MethodPost && r.URL.Path == "/v1/renew") {
			rp.ServeHTTP(w, r)
			return
		}
		// Forward the renewal, let the store commit it, then drop the
		// connection before the answer.
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.url+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		if resp, err := transport.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			dropped.Add(1)
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(proxy.Close)

	viaProxy := leasectl{dir: dir, dsn: proxy.URL}
	p := viaProxy.start(t, "run", "blip", "--ttl", "3s", "--lock-delay", "1m", "--grace", "5s", "--",
		"sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	p.expect(p.out, "started")
	drop.Store(true)
	p.expect(p.out, "got TERM")
	code := p.wait()
	if code != 6 {
		t.Fatalf("run after renewals without answers: exit %d, want 6\n%s", code, p.output())
	}
	if dropped.Load() == 0 {
		t.Fatalf("no renewal reached the store\n%s", p.output())
	}
	// run has exited and its command is gone: the key must be free now.
	r := direct.run(t, "get", "blip", "-o", "json")
	if r.code == 0 {
		t.Fatalf("run exited 6 and its command is gone, yet the store still holds run's lease (its renewals committed, their answers lost; "+
			"run never sent the release, which the store would have answered): it keeps the key until it runs out, then its lock-delay "+
			"for 1m more: get: exit %d %s\nrun's stderr:\n%s", r.code, strings.TrimSpace(r.stdout), p.output())
	}
}

// reverseProxy returns a reverse proxy to the served store at storeURL,
// flushing at once and keeping no connection between requests, and its
// transport, through which a test sends a request it held back itself.
func reverseProxy(t *testing.T, storeURL string) (*httputil.ReverseProxy, *http.Transport) {
	t.Helper()
	target, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(transport.CloseIdleConnections)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1
	return rp, transport
}
