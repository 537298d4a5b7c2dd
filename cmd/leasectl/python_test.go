package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/putback"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// TestPythonClient runs examples/python/smoke.py, the Python client (standard
// library only) driving a real leasectl serve on a free port with a tokens
// file: acquire, renew (keeping the TTL), a conflict, a fenced write, revoke,
// list, namespaces, renew many (past one request's 1,000 renewals and 64 KiB
// of body too), release, audit (filtered by op, owner and order too), a reader's 403, a removed
// token's 401, a notify wait, request ids (the client's own, carried by a
// refusal, replayed by a retry) and an acquire whose answer is lost while
// smoke.py holds the SQLite file's write lock (LEASESTORE_SQLITE_PATH): a
// timeout carrying the request id, whose retry learns the outcome. Without python3 it skips, except in CI.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python := lookPython(t)
	const (
		writer  = "py-writer-token-000000"
		admin   = "py-admin-token-0000000"
		reader  = "py-reader-token-000000"
		removed = "py-removed-token-00000"
	)
	dir := t.TempDir()
	db := filepath.Join(dir, "py.db")
	s := startServe(t, dir, "sqlite:"+db, nil, "--tokens",
		writeTokens(t, dir, writer+" writer py\n"+admin+" admin *\n"+reader+" reader py\n"))
	runPython(t, python, "smoke.py", 2*time.Minute, "LEASESTORE_URL="+s.url,
		"WRITER_TOKEN="+writer, "ADMIN_TOKEN="+admin, "READER_TOKEN="+reader, "REMOVED_TOKEN="+removed,
		"LEASESTORE_SQLITE_PATH="+db)
}

// TestPythonMalformedAnswers runs examples/python/answers_smoke.py: a
// server of the script's own on a free port answers the Python client's
// requests with bodies it cannot read (a lease without a field, or whose
// token is not an integer; a result or page without a field of its own; an
// answer that is not an object), and every lease operation, list,
// renew_many and namespaces raises LeaseError unavailable naming the field,
// never a TypeError or KeyError of the client's insides; a lease with a
// field the client does not know still reads. Without python3 it skips,
// except in CI.
func TestPythonMalformedAnswers(t *testing.T) {
	t.Parallel()
	python := lookPython(t)
	runPython(t, python, "answers_smoke.py", time.Minute)
}

// TestPythonCacert runs examples/python/tls_smoke.py against leasectl
// serve presenting a certificate that a private CA signed: the Python
// client names the CA in its base URL as leasectl's DSN does
// (https://HOST:PORT?cacert=FILE), fails unavailable without it, and
// refuses a cacert that cannot serve before anything is sent (a listener
// at the URL those clients name takes no connection). Without python3 it
// skips, except in CI.
func TestPythonCacert(t *testing.T) {
	t.Parallel()
	python := lookPython(t)
	const writer = "py-tls-writer-token-000"
	dir := t.TempDir()
	ca := testca.New(t, "py-private")
	cert, key := ca.Server(t)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "py.db"), nil,
		"--tls-cert", cert, "--tls-key", key, "--tokens", writeTokens(t, dir, writer+" writer py\n"))
	ln, accepted := countingListener(t)
	runPython(t, python, "tls_smoke.py", time.Minute, "LEASESTORE_URL="+s.url, "LEASESTORE_CA="+ca.CertFile,
		"WRITER_TOKEN="+writer, "BAD_URL=https://"+ln.Addr().String(), "SSL_CERT_FILE="+filepath.Join(dir, "no-such-bundle.pem"))
	if n := accepted.Load(); n != 0 {
		t.Errorf("the refused clients' port took %d connections; want none", n)
	}
}

// TestPythonFollowAcrossRestarts runs examples/python/follow_smoke.py: the
// Python client follows one key's audit records from a real leasectl serve
// that the test stops (SIGTERM) and starts again at the same address when
// the script asks. The follow yields the next record once after a restart;
// after a restart during which the records it passed (other keys') were
// pruned it resumes from the position the stream told, not behind the
// prune; and when the server stays away it raises unavailable after its
// reconnects, naming the cursor to follow again from. First, against a
// hostile server of the script's own, a record or position event it cannot
// read ends the follow with an error naming the event, without a reconnect,
// and audit() refuses a record of that server it cannot read (a format
// version it does not know, a field missing) as the follow does; a field it
// does not know (a newer server's) is ignored by audit(), the follow and
// list(), as by the Go client.
// Without python3 it skips, except in CI.
func TestPythonFollowAcrossRestarts(t *testing.T) {
	t.Parallel()
	python := lookPython(t)
	const writer = "py-follow-writer-token-0"
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "py.db")
	tokens := writeTokens(t, dir, writer+" writer py\n")
	s := startServe(t, dir, dsn, nil, "--tokens", tokens)
	addr := strings.TrimPrefix(s.url, "http://")
	cmd := pythonCommand(t, python, "follow_smoke.py", 2*time.Minute, "LEASESTORE_URL="+s.url, "WRITER_TOKEN="+writer)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range startLines(t, cmd) {
		out = append(out, line)
		switch line {
		case "RESTART", "RESTART-PRUNE", "STOP":
			if code := s.stop(t); code != 0 {
				t.Fatalf("serve exited %d at SIGTERM; stderr: %s", code, s.stderr)
			}
			if line == "RESTART-PRUNE" {
				leasectl{dir: dir, dsn: dsn}.runJSON(t, 0, "audit", "prune", "--before", "0s", "--yes")
			}
			if line != "STOP" {
				s = startServe(t, dir, dsn, nil, "--listen", addr, "--tokens", tokens)
			}
			if _, err := io.WriteString(stdin, "done\n"); err != nil {
				t.Fatalf("tell follow_smoke.py: %v", err)
			}
		}
	}
	err = cmd.Wait()
	t.Logf("follow_smoke.py:\n%s", strings.Join(out, "\n"))
	if err != nil {
		t.Fatalf("follow_smoke.py: %v\nstderr: %s", err, stderr)
	}
}

// The Python lines of docs/http-api.md run as written against a served
// store (its address put in for the one they name): they acquire, renew
// and release, and a second run while another owner holds the key takes
// the conflict branch and prints the holder. Without python3 it skips,
// except in CI.
func TestHTTPAPIPythonLines(t *testing.T) {
	t.Parallel()
	python := lookPython(t)
	src := codeBlock(t, "docs/http-api.md", "python", "from leasestore import")
	const token = "py-docs-writer-token-0000"
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "py.db")
	s := startServe(t, dir, dsn, nil, "--tokens", writeTokens(t, dir, token+" writer billing\n"))
	if !strings.Contains(src, `"http://127.0.0.1:7070"`) {
		t.Fatalf("the Python lines name no http://127.0.0.1:7070 to replace:\n%s", src)
	}
	src = strings.Replace(src, `"http://127.0.0.1:7070"`, strconv.Quote(s.url), 1)
	pkg, err := filepath.Abs(filepath.Join("..", "..", "examples", "python"))
	if err != nil {
		t.Fatal(err)
	}
	runPy := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-c", src)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+pkg, "LEASESTORE_API_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the Python lines failed: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := runPy(); out != "" {
		t.Errorf("the Python lines printed %q after an acquire", out)
	}
	c := leasectl{dir: dir, dsn: dsn}
	r := c.runJSON(t, 0, "audit", "-n", "billing", "--key", "invoice-run", "--order", "oldest")
	var ops []string
	for _, rec := range r["records"].([]any) {
		ops = append(ops, rec.(map[string]any)["op"].(string))
	}
	if strings.Join(ops, " ") != "acquire renew release" {
		t.Fatalf("the Python lines left the records %v, want acquire, renew, release", ops)
	}
	c.runJSON(t, 0, "acquire", "invoice-run", "-n", "billing", "--owner", "worker-2")
	if out := runPy(); !strings.HasPrefix(out, "held by worker-2 until ") {
		t.Errorf("the Python lines against a held key printed %q", out)
	}
}

// lookPython returns python3's path, skipping the test without one, except
// when CI is set, where it fails.
// pythonCommand returns the command that runs examples/python/script
// with python in the script's directory, env added to the test's own
// environment, ended by the test's cleanup or after timeout.
func pythonCommand(t *testing.T, python, script string, timeout time.Duration, env ...string) *exec.Cmd {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "examples", "python", script))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, python, path)
	cmd.Dir = filepath.Dir(path)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	return cmd
}

// runPython runs examples/python/script as pythonCommand makes it, logs
// its output and fails the test when it exits other than 0.
func runPython(t *testing.T, python, script string, timeout time.Duration, env ...string) {
	t.Helper()
	out, err := pythonCommand(t, python, script, timeout, env...).CombinedOutput()
	t.Logf("%s:\n%s", script, out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

// countingListener listens on a free loopback port, closes every
// connection it accepts and counts them: the address a refused client
// names, to show that it sent nothing.
func countingListener(t *testing.T) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln, accepted
}

func lookPython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is not on PATH (CI is set, so this fails rather than skips): %v", err)
		}
		t.Skipf("python3 is not on PATH: the Python tests need it (%v)", err)
	}
	return python
}

// TestPythonRestartRequired runs examples/python/restart_smoke.py against
// leasectl serve on a SQLite file that was put back under it (a copy taken
// before it served anything, renamed over it as a restore does): the
// served store refuses every operation until restarted, answering 503
// with error_code restart_required, and the Python client raises
// LeaseError whose restart_required is true and which is not retryable;
// its follow raises it at once instead of reconnecting. Without python3 it
// skips, except in CI.
func TestPythonRestartRequired(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	t.Parallel()
	python := lookPython(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "py.db")
	if out, err := exec.Command(bin, "migrate", "up", "--dsn", "sqlite:"+db).CombinedOutput(); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	backup, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "sqlite:"+db, nil)
	putback.File(t, db, backup)
	runPython(t, python, "restart_smoke.py", time.Minute, "LEASESTORE_URL="+s.url)
}
