//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// holdingProxy stands between leasectl and a served store. The first
// request to path whose body or Idempotency-Key contains needle reaches
// the store, which commits it; its answer is then held back: committed
// gets a value, and the proxy waits until the client gives the request up
// (then it drops the connection, the answer lost) or the test sends on
// let (then it passes the answer on). Every other request passes.
type holdingProxy struct {
	url       string
	committed chan struct{}
	let       chan struct{}
	abandoned atomic.Bool // the client gave the held request up
}

func newHoldingProxy(t *testing.T, storeURL, path, needle string) *holdingProxy {
	t.Helper()
	rp, transport := reverseProxy(t, storeURL)
	hp := &holdingProxy{committed: make(chan struct{}, 1), let: make(chan struct{})}
	var taken atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !(strings.Contains(string(body), needle) || strings.Contains(r.Header.Get("Idempotency-Key"), needle)) ||
			!taken.CompareAndSwap(false, true) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			rp.ServeHTTP(w, r)
			return
		}
		// The store commits the request whatever the client does.
		req, _ := http.NewRequestWithContext(context.Background(), r.Method, storeURL+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := transport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		hp.committed <- struct{}{}
		select {
		case <-r.Context().Done():
			hp.abandoned.Store(true)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
		case <-hp.let:
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(answer)
		}
	}))
	t.Cleanup(srv.Close)
	hp.url = srv.URL
	return hp
}

// awaitCommitted waits until the held request committed in the store.
func (hp *holdingProxy) awaitCommitted(t *testing.T, p *proc) {
	t.Helper()
	select {
	case <-hp.committed:
	case <-time.After(time.Minute):
		t.Fatalf("the request to hold never came\n%s", p.output())
	}
}

// awaitSignalTaken waits until the kernel has handed sig to the process
// (it is no longer pending: Go's handler has it), and a little more for
// the handler to pass it on to the command's context.
func awaitSignalTaken(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	bit := uint64(1) << (uint(sig) - 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			break // no /proc: the sleep alone
		}
		pending := uint64(0)
		for _, line := range strings.Split(string(status), "\n") {
			for _, field := range []string{"SigPnd:", "ShdPnd:"} {
				if v, ok := strings.CutPrefix(line, field); ok {
					n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
					pending |= n
				}
			}
		}
		if pending&bit == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
}

// TestRunInterruptedBeforeTheCommandReleases: Ctrl-C (SIGINT) that reaches
// run before CMD started ends run with status interrupted, exit 130,
// without running CMD, and leaves the key free: a lease run took goes back
// at once, not after its TTL and then its lock-delay. The moments, each
// made exact by a proxy in front of a served store (SQLite, PostgreSQL)
// that lets the store commit a request and holds its answer back:
//
//   - acquire in flight: the acquire took the lease and Ctrl-C cut its
//     answer off. run must learn the outcome by replaying the acquire with
//     its request id, and release. It printed "timeout ... context
//     canceled", exited 130 and left the lease held for the whole TTL.
//   - the same with --request-id (the claim case): it must claim the lease
//     (it is not another run's: none claimed it), then release.
//   - between the acquire and CMD (--request-id: the claim's renew is in
//     flight when Ctrl-C comes): CMD must not start. It ran CMD as if no
//     Ctrl-C had come (exit 0).
func TestRunInterruptedBeforeTheCommandReleases(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) (dir, dsn string){
		"sqlite": func(t *testing.T) (string, string) {
			dir := t.TempDir()
			return dir, "sqlite:" + filepath.Join(dir, "leases.db")
		},
		"postgres": func(t *testing.T) (string, string) { return t.TempDir(), pgtest.MigratedDSN(t) },
	}
	cases := []struct {
		name, path, needle string
		args               []string
		let                bool // pass the held answer on once run has the signal
	}{
		{"acquire in flight", "/v1/acquire", "", nil, false},
		{"acquire in flight, --request-id", "/v1/acquire", "", []string{"--request-id", "mine-1"}, false},
		{"claim in flight, --request-id", "/v1/renew", "mine-2/run", []string{"--request-id", "mine-2"}, true},
	}
	for store, open := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dir, dsn := open(t)
			if strings.HasPrefix(dsn, "sqlite:") {
				if r := (leasectl{dir: dir, dsn: dsn}).run(t, "migrate", "up"); r.code != 0 {
					t.Fatalf("migrate up\n%s", r)
				}
			}
			direct := leasectl{dir: dir, dsn: dsn}
			srv := startServe(t, dir, dsn, nil)
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					key := "int-" + strconv.Itoa(i)
					hp := newHoldingProxy(t, srv.url, tc.path, tc.needle)
					args := append([]string{"run", key, "--owner", "w", "--ttl", "1m", "--lock-delay", "1m"}, tc.args...)
					p := (leasectl{dir: dir, dsn: hp.url}).start(t, append(args, "--", "sh", "-c", "echo ran")...)
					hp.awaitCommitted(t, p)
					if err := p.signal(os.Interrupt); err != nil {
						t.Fatal(err)
					}
					if tc.let {
						awaitSignalTaken(t, p.cmd.Process.Pid, syscall.SIGINT)
						close(hp.let)
					}
					code := p.wait()
					if code != 130 || strings.Contains(p.stdout.String(), "ran") {
						t.Errorf("run interrupted before its command started: exit %d, want 130 and the command not run\n%s", code, p.output())
					}
					if !strings.Contains(p.output(), "interrupted") {
						t.Errorf("run interrupted before its command started does not say interrupted\n%s", p.output())
					}
					if r := direct.run(t, "get", key, "-o", "json"); r.code != 4 || !strings.Contains(r.stdout, `"lease":null`) {
						t.Fatalf("after run was interrupted before its command started, the key is not free (get: exit %d, want 4 "+
							"with no lease): %s\nrun's output:\n%s", r.code, strings.TrimSpace(r.stdout), p.output())
					}
				})
			}
		})
	}
}

// TestRunReleaseIsBoundedByTimeout: the release when CMD ends is one
// operation, bounded by --timeout (operator-guide.md: "deadline of each
// operation"), not by the renewal timeout, a third of --ttl. Here the
// store takes a second to answer the release, with --ttl 1500ms and the
// default --timeout 5s: run cut its release off after 500ms, and the lease
// stayed held until it ran out, then its lock-delay kept the key for 1m.
func TestRunReleaseIsBoundedByTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	srv := startServe(t, dir, direct.dsn, nil)
	rp, _ := reverseProxy(t, srv.url)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/release" {
			select {
			case <-time.After(time.Second): // a slow store
			case <-r.Context().Done():
				return // given up: the release never reaches the store
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	r := (leasectl{dir: dir, dsn: proxy.URL}).run(t, "run", "slow", "--ttl", "1500ms", "--lock-delay", "1m", "--", "true")
	if r.code != 0 {
		t.Fatalf("run of true: exit %d, want 0\n%s", r.code, r)
	}
	if g := direct.run(t, "get", "slow", "-o", "json"); g.code != 4 || !strings.Contains(g.stdout, `"lease":null`) {
		t.Fatalf("run's release, which the store answers in 1s, was cut off before --timeout (5s): the key is not free "+
			"(get: exit %d, want 4 with no lease): %s\nrun's stderr:\n%s", g.code, strings.TrimSpace(g.stdout), r.stderr)
	}
}

// TestRunInterruptedWaitLeavesTheKeyFree: Ctrl-C that stops `run --wait`
// while an attempt is in flight, an attempt that met the holder (conflict,
// recorded nowhere) and whose answer the interrupt cut off, after the
// holder let go: run learns the attempt's outcome by sending the acquire
// again with its request id, which takes the free key, and releases it at
// once, so the key ends free. As documented (operator-guide.md, exit 130),
// the request id is then spent: the same run again exits 4. (A first fix
// read the key instead and sent nothing when it was free; that left the
// key held for its TTL by an acquire arriving late:
// TestRunInterruptedAcquireLandingAfterTheReadIsReleased.)
func TestRunInterruptedWaitLeavesTheKeyFree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	if r := direct.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	srv := startServe(t, dir, direct.dsn, nil)
	for i, extra := range [][]string{nil, {"--request-id", "waited-1"}} {
		key := "wait-" + strconv.Itoa(i)
		if r := direct.run(t, "acquire", key, "--owner", "h", "--ttl", "1m", "-o", "json"); r.code != 0 {
			t.Fatalf("acquire by the holder\n%s", r)
		}
		hp := newHoldingProxy(t, srv.url, "/v1/acquire", "")
		args := append([]string{"run", key, "--wait", "--owner", "w", "--ttl", "1m"}, extra...)
		p := (leasectl{dir: dir, dsn: hp.url}).start(t, append(args, "--", "sh", "-c", "echo ran")...)
		hp.awaitCommitted(t, p) // the first attempt met the holder: conflict, its answer held back
		g := direct.run(t, "get", key, "-o", "json")
		if !strings.Contains(g.stdout, `"owner":"h"`) {
			t.Fatalf("the holder does not hold the key: %s", g.stdout)
		}
		var tok struct {
			Lease struct{ Token int64 } `json:"lease"`
		}
		if err := json.Unmarshal([]byte(g.stdout), &tok); err != nil {
			t.Fatal(err)
		}
		if r := direct.run(t, "release", key, "--owner", "h", "--token", strconv.FormatInt(tok.Lease.Token, 10)); r.code != 0 {
			t.Fatalf("release by the holder\n%s", r)
		}
		if err := p.signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(); code != 130 {
			t.Fatalf("run --wait interrupted: exit %d, want 130\n%s", code, p.output())
		}
		if g := direct.run(t, "get", key, "-o", "json"); g.code != 4 {
			t.Errorf("run --wait %v, interrupted while its attempt was in flight: the key is not free "+
				"(get: exit %d, want 4): %s\nrun's output:\n%s", extra, g.code, g.stdout, p.output())
		}
		if extra != nil {
			r := direct.run(t, append(args, "--", "sh", "-c", "echo ran")...)
			if r.code != 4 || strings.Contains(r.stdout, "ran") {
				t.Errorf("run again with the spent request id of an interrupted run: exit %d, want 4 and the command "+
					"not run\n%s", r.code, r)
			}
		}
	}
}

// TestRunInterruptedWaitNamesTheHolder: operator-guide.md's exit code 130:
// "an interrupted `acquire --wait` or `run --wait` keeps the holder it
// waited for in `lease`". Ctrl-C that cuts off run --wait's attempt in
// flight (it met the holder; its answer held back) makes run send the
// acquire again, which answers the holder, yet run prints only
// "interrupted", no lease.
func TestRunInterruptedWaitNamesTheHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	if r := direct.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	srv := startServe(t, dir, direct.dsn, nil)
	if r := direct.run(t, "acquire", "held", "--owner", "h", "--ttl", "1m", "-o", "json"); r.code != 0 {
		t.Fatalf("acquire by the holder\n%s", r)
	}
	hp := newHoldingProxy(t, srv.url, "/v1/acquire", "")
	p := (leasectl{dir: dir, dsn: hp.url}).start(t, "run", "held", "--wait", "--owner", "w", "--ttl", "1m", "-o", "json",
		"--", "sh", "-c", "echo ran")
	hp.awaitCommitted(t, p)
	if err := p.signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 130 {
		t.Fatalf("run --wait interrupted: exit %d, want 130\n%s", code, p.output())
	}
	if out := p.stdout.String(); !strings.Contains(out, `"status":"interrupted"`) || !strings.Contains(out, `"owner":"h"`) {
		t.Errorf("run --wait interrupted while its attempt was in flight, the key held by h: want status interrupted "+
			"and the holder in lease\n%s", p.output())
	}
}

// TestRunWaitStoppedInFlightNamesTheLease: run --wait stopped while its
// attempt was in flight (its answer held back) names the lease that the
// acquire sent again meets, as a wait stopped while asleep does: after
// --wait-timeout, conflict whose message does not repeat the key that the
// result names already; on a key kept by the lock-delay of a revoked
// lease, the store's lock-delay verdict (the lease ended, the key is free
// at a time), not a lease "held ... until" its end, after --wait-timeout
// and after Ctrl-C alike.
func TestRunWaitStoppedInFlightNamesTheLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	if r := direct.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	srv := startServe(t, dir, direct.dsn, nil)
	if r := direct.run(t, "acquire", "held", "--owner", "h", "--ttl", "1m"); r.code != 0 {
		t.Fatalf("acquire by the holder\n%s", r)
	}
	if r := direct.run(t, "acquire", "delayed", "--owner", "h", "--ttl", "1m", "--lock-delay", "1h"); r.code != 0 {
		t.Fatalf("acquire by the holder\n%s", r)
	}
	if r := direct.run(t, "revoke", "delayed", "--reason", "test"); r.code != 0 {
		t.Fatalf("revoke\n%s", r)
	}
	for _, c := range []struct {
		key       string
		interrupt bool
	}{{"held", false}, {"delayed", false}, {"delayed", true}} {
		hp := newHoldingProxy(t, srv.url, "/v1/acquire", "")
		args := []string{"run", c.key, "--wait", "--owner", "w", "--ttl", "1m", "-o", "json"}
		want, stop := 3, "--wait-timeout"
		if c.interrupt {
			want, stop = 130, "Ctrl-C"
		} else {
			args = append(args, "--wait-timeout", "1s")
		}
		p := (leasectl{dir: dir, dsn: hp.url}).start(t, append(args, "--", "sh", "-c", "echo ran")...)
		hp.awaitCommitted(t, p) // the first attempt met the lease: conflict, its answer held back
		if c.interrupt {
			if err := p.signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
		if code := p.wait(); code != want {
			t.Fatalf("run --wait on %s stopped by %s while its attempt was in flight: exit %d, want %d\n%s",
				c.key, stop, code, want, p.output())
		}
		var res struct {
			Message string
			Lease   *struct{ Owner string }
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &res); err != nil {
			t.Fatalf("%v\n%s", err, p.output())
		}
		switch {
		case res.Lease == nil || res.Lease.Owner != "h":
			t.Errorf("run --wait on %s stopped by %s while its attempt was in flight: want the lease of h in lease\n%s",
				c.key, stop, p.output())
		case strings.Contains(res.Message, "default/"+c.key):
			t.Errorf("run --wait on %s stopped by %s while its attempt was in flight: message %q repeats the key",
				c.key, stop, res.Message)
		case c.key == "delayed" && (!strings.HasPrefix(res.Message, "lock-delay: ") || strings.Contains(res.Message, "held by") ||
			!strings.Contains(res.Message, "free at")):
			t.Errorf("run --wait on a key kept by a lock-delay stopped by %s while its attempt was in flight: message %q, "+
				"want the lock-delay verdict and when the key is free", stop, res.Message)
		}
	}
}
