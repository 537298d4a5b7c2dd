//go:build linux

package main

// helper-74's review of holding leases over time: run in a terminal, and
// run's command after leasectl itself dies.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// sigintCounter is a command that counts the SIGINTs it receives (blocked
// and taken one by one with sigtimedwait, so that each delivery counts),
// with who sent each (si_pid 0 and si_code 128, SI_KERNEL: the terminal;
// si_code 0, SI_USER: a kill from the process si_pid), and prints them
// once none came for 2 s after the first.
const sigintCounter = `
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
print("ready", flush=True)
got = []
while True:
    info = signal.sigtimedwait({signal.SIGINT}, 2 if got else 30)
    if info is None:
        break
    got.append("pid=%d code=%d" % (info.si_pid, info.si_code))
print("sigints=%d %s" % (len(got), "; ".join(got)), flush=True)
`

// TestRunInATerminalCtrlCReachesTheCommandOnce: in a terminal run keeps
// CMD in its own process group "so that job control works as for any
// command (Ctrl-C and Ctrl-Z reach CMD directly)". A Ctrl-C then reaches
// CMD from the terminal, and reaches run too, which forwards it: CMD gets
// SIGINT twice for one Ctrl-C. A command that shuts down gracefully on
// the first interrupt and gives up at once on the second (terraform,
// docker compose, many servers) is thus made to abort by a single
// Ctrl-C under leasectl run, where it would have cleaned up when run
// directly.
func TestRunInATerminalCtrlCReachesTheCommandOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "run", "tty-int", "--", "python3", "-c", sigintCounter)
	cmd.Stdout, cmd.Stderr = nil, nil
	// pty.Start makes run a session leader with the terminal as its
	// controlling one, in the foreground: "run in the foreground of its
	// controlling terminal".
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	var seen []string
	expect := func(want string) string {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the terminal closed without %q; seen %q", want, seen)
				}
				seen = append(seen, line)
				if strings.Contains(line, want) {
					return line
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %q on the terminal within 30s; seen %q", want, seen)
			}
		}
	}
	expect("ready")
	if _, err := ptmx.WriteString("\x03"); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	got := expect("sigints=")
	if err := cmd.Wait(); err != nil {
		t.Logf("run: %v", err)
	}
	if !strings.Contains(got, "sigints=1 ") {
		t.Fatalf("one Ctrl-C in the terminal: the command under run got %q, want one SIGINT (the terminal's); seen %q", got, seen)
	}
}

// TestRunCommandDiesWithKilledLeasectl: when leasectl run itself is
// killed (SIGKILL: the OOM killer, a supervisor's hard stop, kill -9), it
// can neither renew nor signal CMD, which runs in a process group of its
// own. CMD runs on; the lease runs out after its TTL and another holder
// takes the key while CMD still works under the old lease: two commands
// at once under one key, the very thing run exists to prevent. Nothing
// ties CMD's life to run's (Linux: SysProcAttr.Pdeathsig), and the docs do
// not warn of it.
func TestRunCommandDiesWithKilledLeasectl(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	p := c.start(t, "run", "killed-run", "--ttl", "1s", "--", "sh", "-c", `echo "pid $$"; exec sleep 60 </dev/null >/dev/null 2>&1`)
	line := p.expect(p.out, "pid ")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL to leasectl run
		t.Fatal(err)
	}
	_ = p.wait()
	// Past the lease's TTL: anyone may take the key now.
	time.Sleep(1500 * time.Millisecond)
	r := c.run(t, "acquire", "killed-run", "--owner", "second", "-o", "json")
	cmdAlive := !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	if r.code == 0 && cmdAlive {
		t.Fatalf("leasectl run was SIGKILLed: its command (pid %d) still runs 1.5s later, after its lease (ttl 1s) ran out and another owner acquired the key (exit %d): two holders at once", pid, r.code)
	}
	if cmdAlive {
		t.Fatalf("leasectl run was SIGKILLed: its command (pid %d) still runs 1.5s later, with nobody renewing its lease", pid)
	}
}

// TestRunReleasesAfterALossByTheLocalClock: when run's renewals get no
// answer (here: each reaches the store and commits, and the connection
// drops before the answer, as in a network blip between run and the
// store), run gives the lease up by its local clock, stops CMD and exits
// 6, but never sends the release, although the store answers it (the
// proxy passes releases) and CMD is gone: the lease the renewals kept
// stays held until its TTL runs out, and then its lock-delay keeps the
// key from every other run for D more. The scheduler does release a
// lease it lost by the local clock once its handler returned ("it may
// still be the worker's"); Hold.Release answers the loss's cause without
// a release.
func TestRunReleasesAfterALossByTheLocalClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	direct := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	srv := startServe(t, dir, direct.dsn, nil)
	target, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(transport.CloseIdleConnections)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1
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
