//go:build unix

package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// The bearer tokens of servedForRun's store.
const (
	runWriterToken = "run-writer-0123456789"
	runAdminToken  = "run-admin-0123456789"
)

// servedForRun serves a SQLite store in dir over HTTP (in this process)
// and returns its URL. The writer token is accepted until a file named
// "withdrawn" appears in dir (as after its removal from a tokens file and
// a reload); the admin token always. With deaf, the server refuses every
// notification stream (503), as one whose --max-streams are open does:
// run then hears a loss only from a renewal or its release.
func servedForRun(t *testing.T, dir string, deaf bool) string {
	t.Helper()
	url, _ := servedForRunCut(t, dir, deaf)
	return url
}

// servedForRunCut is servedForRun, and a function that cuts the store
// off: the server stops listening and drops its connections, so that
// every later request meets a refused connection.
func servedForRunCut(t *testing.T, dir string, deaf bool) (url string, cut func()) {
	t.Helper()
	tg, err := parseDSN("sqlite:" + filepath.Join(dir, "served.db"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &app{getenv: env{}.get, log: quiet, red: newRedactor(), timeout: 5 * time.Second}
	s, err := a.openTarget(t.Context(), tg, openOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(a) })
	both, err := httpapi.ParseTokens(strings.NewReader(runWriterToken + " writer *\n" + runAdminToken + " admin *\n"))
	if err != nil {
		t.Fatal(err)
	}
	adminOnly, err := httpapi.ParseTokens(strings.NewReader(runAdminToken + " admin *\n"))
	if err != nil {
		t.Fatal(err)
	}
	withdrawn := filepath.Join(dir, "withdrawn")
	h, err := httpapi.NewHandler(s.rt, s.audit, &httpapi.Config{Logger: quiet, Tokens: func() *httpapi.Tokens {
		if _, err := os.Stat(withdrawn); err == nil {
			return adminOnly
		}
		return both
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deaf && strings.HasPrefix(r.URL.Path, "/v1/notify/") {
			http.Error(w, `{"status":"unavailable","message":"too many streams"}`, http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, srv.Close
}

// TestRunWhoseTokenIsWithdrawnBeforeItsReleaseExits7: a served store that
// stops accepting run's bearer token while CMD runs, CMD ending (0) before
// the next renewal, refuses the release with 401. That is the loss run's
// help names ("the loss is the same and run exits 7, naming
// LEASESTORE_API_TOKEN") and a renewal refused so ends in: the lease,
// which run can no longer renew or release, stays in the store until it
// runs out. run exited 0 with a warning that the release failed.
func TestRunWhoseTokenIsWithdrawnBeforeItsReleaseExits7(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env{EnvDSN: servedForRun(t, dir, false), EnvAPIToken: runWriterToken}
	o := runCLI(t, e, "run", "k", "--owner", "w", "--", "sh", "-c", `touch "$0"`, filepath.Join(dir, "withdrawn"))
	wantCode(t, o, ExitAuth)
	if !strings.Contains(o.stderr, EnvAPIToken) {
		t.Fatalf("run does not name %s\nstderr: %s", EnvAPIToken, o.stderr)
	}
}

// TestRunWhoseGroupOutlivesTheKillHearsAnUnheardLoss: when processes of
// CMD's group outlive SIGKILL run does not release (the lease runs out
// after its TTL), so no refused release tells it of a loss the store did
// not signal (here: the server refuses run's notification stream). CMD
// ended 0 after the lease was revoked while it ran: run must exit 6, as
// when the release finds the lease gone. It exited 0. SIGURG, which sleep
// ignores, stands in for a SIGKILL that a process outlives.
func TestRunWhoseGroupOutlivesTheKillHearsAnUnheardLoss(t *testing.T) {
	// Not in a terminal, whatever the test runs in (not parallel: the
	// variables are the package's).
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty")
	groupKill, killWait = syscall.SIGURG, time.Second
	t.Cleanup(func() {
		controllingTerminal, groupKill, killWait = "/dev/tty", syscall.SIGKILL, 5*time.Second
	})
	dir := t.TempDir()
	url := servedForRun(t, dir, true)
	pidfile, revoked := filepath.Join(dir, "stubborn.pid"), filepath.Join(dir, "revoked")
	done := make(chan outcome, 1)
	go func() {
		// The grandchild ignores SIGTERM and outlives CMD, which ends 0
		// once the test revoked the lease.
		done <- runCLI(t, env{EnvDSN: url, EnvAPIToken: runWriterToken}, "run", "stubborn", "--grace", "200ms", "--",
			"sh", "-c", `(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & echo $! > "$0"; `+
				`while [ ! -e "$1" ]; do sleep 0.01; done; exit 0`, pidfile, revoked)
	}()
	pid := readPidFile(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	wantCode(t, runCLI(t, env{EnvDSN: url, EnvAPIToken: runAdminToken}, "revoke", "stubborn", "--reason", "test"), 0)
	if err := os.WriteFile(revoked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := awaitRun(t, done, pid, 30*time.Second, "a group outliving the kill")
	if !strings.Contains(o.stderr, "still run after SIGKILL") {
		t.Fatalf("the group did not outlive the kill (the test's premise)\nstderr: %s", o.stderr)
	}
	if strings.Contains(o.stderr, "lease was lost; stopping") {
		t.Fatalf("run heard the revoke from the store (the test's premise is that it does not)\nstderr: %s", o.stderr)
	}
	wantCode(t, o, ExitLost)
}

// TestRunWhoseReleaseGetsNoAnswerExits5: the lease is revoked while CMD
// runs and no signal tells run (the server refuses its notification
// stream; the next renewal is 20s away), then the store is cut off and
// CMD ends 0: the release gets no answer, so run cannot tell whether the
// lease was held until CMD ended. It must exit 5 (the store did not
// answer: the outcome is unknown), saying so on stderr, not CMD's 0, which
// claims that CMD ran under the lease throughout. It exited 0.
func TestRunWhoseReleaseGetsNoAnswerExits5(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url, cut := servedForRunCut(t, dir, true)
	started, ended := filepath.Join(dir, "started"), filepath.Join(dir, "end")
	done := make(chan outcome, 1)
	go func() {
		done <- runCLI(t, env{EnvDSN: url, EnvAPIToken: runWriterToken}, "--timeout", "2s", "run", "k", "--ttl", "1m", "--",
			"sh", "-c", `echo $$ > "$0"; while [ ! -e "$1" ]; do sleep 0.01; done; exit 0`, started, ended)
	}()
	readPidFile(t, started)
	wantCode(t, runCLI(t, env{EnvDSN: url, EnvAPIToken: runAdminToken}, "revoke", "k", "--reason", "test"), 0)
	cut()
	if err := os.WriteFile(ended, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end within 30s of its command")
	}
	if strings.Contains(o.stderr, "lease was lost; stopping") {
		t.Fatalf("run heard the revoke (the test's premise is that it does not)\nstderr: %s", o.stderr)
	}
	wantCode(t, o, ExitUnavailable)
	if !strings.Contains(o.stderr, "unknown") || !strings.Contains(o.stderr, "release") {
		t.Errorf("run's stderr does not say that the release got no answer and the outcome is unknown:\n%s", o.stderr)
	}
}

// TestRunWhoseGroupOutlivesTheKillAndWhoseReadGetsNoAnswerExits5: as
// TestRunWhoseGroupOutlivesTheKillHearsAnUnheardLoss, run does not release
// (a process of CMD's group outlived SIGKILL) and reads the key instead to
// learn of a loss no signal told it; here the store is cut off after the
// revoke, so the read gets no answer and run cannot tell whether the lease
// was held until CMD ended. It must exit 5, saying so on stderr, not CMD's
// 0. It exited 0.
func TestRunWhoseGroupOutlivesTheKillAndWhoseReadGetsNoAnswerExits5(t *testing.T) {
	// Not in a terminal, whatever the test runs in (not parallel: the
	// variables are the package's).
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty")
	groupKill, killWait = syscall.SIGURG, time.Second
	t.Cleanup(func() {
		controllingTerminal, groupKill, killWait = "/dev/tty", syscall.SIGKILL, 5*time.Second
	})
	dir := t.TempDir()
	url, cut := servedForRunCut(t, dir, true)
	pidfile, revoked := filepath.Join(dir, "stubborn.pid"), filepath.Join(dir, "revoked")
	done := make(chan outcome, 1)
	go func() {
		done <- runCLI(t, env{EnvDSN: url, EnvAPIToken: runWriterToken}, "--timeout", "2s", "run", "stubborn",
			"--ttl", "1m", "--grace", "200ms", "--",
			"sh", "-c", `(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & echo $! > "$0"; `+
				`while [ ! -e "$1" ]; do sleep 0.01; done; exit 0`, pidfile, revoked)
	}()
	pid := readPidFile(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	wantCode(t, runCLI(t, env{EnvDSN: url, EnvAPIToken: runAdminToken}, "revoke", "stubborn", "--reason", "test"), 0)
	cut()
	if err := os.WriteFile(revoked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := awaitRun(t, done, pid, 30*time.Second, "a group outliving the kill")
	if !strings.Contains(o.stderr, "still run after SIGKILL") {
		t.Fatalf("the group did not outlive the kill (the test's premise)\nstderr: %s", o.stderr)
	}
	if strings.Contains(o.stderr, "lease was lost; stopping") {
		t.Fatalf("run heard the revoke (the test's premise is that it does not)\nstderr: %s", o.stderr)
	}
	wantCode(t, o, ExitUnavailable)
	if !strings.Contains(o.stderr, "unknown") {
		t.Errorf("run's stderr does not say that the outcome is unknown:\n%s", o.stderr)
	}
}
