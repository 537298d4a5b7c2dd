//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// runCLISync is runCLI with streams safe for concurrent writes: run's log
// lines (the loss heard while CMD runs) and the copies of CMD's output
// that os/exec makes into streams that are not files go to them at once.
func runCLISync(t *testing.T, e env, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	code := Execute(ctx, args, nil, &stdout, &stderr, e.get)
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ranJSON checks that run -o json printed, after CMD's own output (cmdOut),
// exactly one result object with the status want, a lease, and a message
// naming CMD's exit code (exited, "" for none), and returns it.
func ranJSON(t *testing.T, o outcome, cmdOut, want, exited string) map[string]any {
	t.Helper()
	rest, ok := strings.CutPrefix(o.stdout, cmdOut)
	if !ok {
		t.Fatalf("stdout does not start with the command's output %q\nstdout: %s\nstderr: %s", cmdOut, o.stdout, o.stderr)
	}
	m := outcome{stdout: rest, stderr: o.stderr}.json(t)
	for _, k := range resultKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("run's result has no %q: %v", k, m)
		}
	}
	if m["status"] != want {
		t.Errorf("run's result has status %v, want %s: %v\nstderr: %s", m["status"], want, m, o.stderr)
	}
	if l, _ := m["lease"].(map[string]any); l == nil || l["token"] == nil {
		t.Errorf("run's result has no lease: %v", m)
	}
	if msg, _ := m["message"].(string); exited != "" && !strings.Contains(msg, exited) {
		t.Errorf("run's result's message %q does not say %q", msg, exited)
	}
	return m
}

// TestRunJSONPrintsOneResultAfterTheCommand: with -o json, run prints one
// result object on stdout once CMD has ended and the lease is released (or
// found lost), after CMD's own output, whatever the end: released (CMD's
// own code, 0 or not), lost (6), the release unanswered (5), the bearer
// token refused (7). In table mode stdout holds CMD's output alone. run
// printed nothing of its own after CMD started.
func TestRunJSONPrintsOneResultAfterTheCommand(t *testing.T) {
	t.Parallel()
	t.Run("released", func(t *testing.T) {
		t.Parallel()
		e := sqliteEnv(t)
		for _, code := range []int{0, 3} {
			o := runCLISync(t, e, "-o", "json", "run", "k", "--", "sh", "-c", fmt.Sprintf("echo hi; exit %d", code))
			wantCode(t, o, code)
			ranJSON(t, o, "hi\n", "released", fmt.Sprintf("exited %d", code))
		}
		o := runCLISync(t, e, "run", "k", "--", "sh", "-c", "echo hi")
		wantCode(t, o, 0)
		if o.stdout != "hi\n" {
			t.Errorf("run in table mode: stdout %q, want the command's output alone", o.stdout)
		}
	})
	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		url := servedForRun(t, dir, false)
		started := filepath.Join(dir, "started")
		done := make(chan outcome, 1)
		go func() {
			done <- runCLISync(t, env{EnvDSN: url, EnvAPIToken: runWriterToken}, "-o", "json", "run", "k", "--", "sh", "-c",
				`trap 'echo stopped; exit 0' TERM; echo $$ > "$0"; while :; do sleep 0.01; done`, started)
		}()
		pid := readPidFile(t, started)
		wantCode(t, runCLI(t, env{EnvDSN: url, EnvAPIToken: runAdminToken}, "revoke", "k", "--reason", "test"), 0)
		o := awaitRun(t, done, pid, 30*time.Second, "a revoked lease")
		wantCode(t, o, ExitLost)
		ranJSON(t, o, "stopped\n", "not_found", "exited 0")
	})
	t.Run("release unanswered", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		url, cut := servedForRunCut(t, dir, true)
		started, ended := filepath.Join(dir, "started"), filepath.Join(dir, "end")
		done := make(chan outcome, 1)
		go func() {
			done <- runCLISync(t, env{EnvDSN: url, EnvAPIToken: runWriterToken}, "-o", "json", "--timeout", "2s", "run", "k", "--ttl", "1m", "--",
				"sh", "-c", `echo $$ > "$0"; while [ ! -e "$1" ]; do sleep 0.01; done; exit 0`, started, ended)
		}()
		pid := readPidFile(t, started)
		cut()
		if err := os.WriteFile(ended, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		o := awaitRun(t, done, pid, 30*time.Second, "a release unanswered")
		wantCode(t, o, ExitUnavailable)
		if m := ranJSON(t, o, "", "unavailable", "exited 0"); !strings.Contains(m["message"].(string), "unknown") {
			t.Errorf("run's result does not say whether the lease was held is unknown: %v", m)
		}
	})
	t.Run("token refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		e := env{EnvDSN: servedForRun(t, dir, false), EnvAPIToken: runWriterToken}
		o := runCLISync(t, e, "-o", "json", "run", "k", "--owner", "w", "--", "sh", "-c", `touch "$0"`, filepath.Join(dir, "withdrawn"))
		wantCode(t, o, ExitAuth)
		if m := ranJSON(t, o, "", StatusUnauthorized, "exited 0"); !strings.Contains(m["message"].(string), EnvAPIToken) {
			t.Errorf("run's result does not name %s: %v", EnvAPIToken, m)
		}
	})
}
