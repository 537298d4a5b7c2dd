//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The operator guide (run): "CMD is looked up in $PATH, and a script's
// interpreter checked, first, so one that cannot be started takes no
// lease and waits for none"; run's help: "A CMD that cannot be started
// (looked up, and a script's #! interpreter checked, before the lease is
// taken, so it takes none) exits 127 (not found) or 126". An executable
// script without a #! line cannot be started by run (exec format error,
// 126), yet run takes the lease first: on a held key it exits 3 (and
// with --wait it would wait for the holder) instead of 126, and on a free
// key it leaves an acquire and a release in the trail.
func TestRunOfAScriptWithoutInterpreterLineTakesNoLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	script := filepath.Join(dir, "report")
	if err := os.WriteFile(script, []byte("echo report\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.runJSON(t, 0, "acquire", "held", "--owner", "other")
	if r := c.run(t, "run", "held", "--", script); r.code != 126 {
		t.Errorf("run of a held key with a CMD that cannot be started (no #! line): exit %d, want 126 (it takes no lease and waits for none)\n%s", r.code, r)
	}
	if r := c.run(t, "run", "free", "--", script); r.code != 126 {
		t.Fatalf("run of a CMD that cannot be started (no #! line): exit %d, want 126\n%s", r.code, r)
	}
	if recs := c.runJSON(t, 0, "audit", "--key", "free")["records"].([]any); len(recs) != 0 {
		t.Errorf("run of a CMD that cannot be started (no #! line) left %d records in the trail of its key, want none (it takes no lease): %v", len(recs), recs)
	}
}

// The exit codes table: 141 "stdout was closed under the command: it
// stops ... and says nothing, as a process ended by SIGPIPE, whatever it
// did before"; 1 "a write to stdout that failed otherwise than by its
// reader going away (a full disk, a closed descriptor): the command stops
// and says so on stderr, whatever it did before". run -o json now writes
// its result on stdout once CMD has ended; when that write fails, run
// obeys these rules only when CMD exited 0: after a CMD that exited 3 it
// exits 3 and says nothing, its result lost, as if all went well.
func TestRunJSONResultThatCannotBeWrittenIsNotCommandsCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	for _, code := range []int{0, 3} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close() // the reader went away before run prints its result
		args := []string{"-o", "json", "run", "job", "--", "sh", "-c", fmt.Sprintf("exit %d", code)}
		cmd := c.command(ctx, args...)
		cmd.Stdout = w
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got := exitOf(t, cmd.Run())
		w.Close()
		cancel()
		if got != 141 {
			t.Errorf("leasectl %s with its stdout's reader gone: exit %d, want 141 (stdout closed)\nstderr: %s",
				strings.Join(args, " "), got, stderr.String())
		}
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		return // no full device here: the closed pipe must do
	}
	for _, code := range []int{0, 3} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"-o", "json", "run", "job", "--", "sh", "-c", fmt.Sprintf("exit %d", code)}
		cmd := c.command(ctx, args...)
		cmd.Stdout = full
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got := exitOf(t, cmd.Run())
		full.Close()
		cancel()
		if got != 1 || !strings.Contains(stderr.String(), "incomplete") {
			t.Errorf("leasectl %s with stdout on a full disk: exit %d, want 1 and stderr saying the output is incomplete\nstderr: %s",
				strings.Join(args, " "), got, stderr.String())
		}
	}
}

// exitOf is the exit code of a finished process (err from its Run).
func exitOf(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// run -o json's result names how CMD ended. A CMD killed by a signal did
// not exit: run exits 128+N as shells report it, but its message says
// "the command exited 137", a code the command never gave (a user looks
// for an exit 137 in the script), where it should name the signal.
func TestRunJSONSaysACommandKilledByASignalWasKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	r := c.run(t, "-o", "json", "run", "job", "--", "sh", "-c", "kill -KILL $$")
	if r.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("run of a command killed by SIGKILL: exit %d, want %d\n%s", r.code, 128+int(syscall.SIGKILL), r)
	}
	m := r.obj(t)
	msg, _ := m["message"].(string)
	if m["status"] != "released" || !strings.Contains(msg, "SIGKILL") && !strings.Contains(msg, "signal") {
		t.Errorf("run -o json of a command killed by SIGKILL: status %v, message %q; want released and a message naming the signal, not an exit", m["status"], msg)
	}
}

// The operator guide (run): "A CMD that prints JSON itself comes first:
// run's result is the last line (`leasectl run KEY -o json -- CMD | tail
// -n 1`)". When CMD's output does not end in a newline (printf, a JSON
// encoder without one, a progress line), run's result follows it on the
// same line, and that last line is not a JSON object.
func TestRunJSONResultIsTheLastLineAfterOutputWithoutNewline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	r := c.run(t, "run", "job", "-o", "json", "--", "printf", `{"mine":1}`)
	if r.code != 0 {
		t.Fatalf("run of printf: exit %d\n%s", r.code, r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	var m map[string]any
	if err := json.Unmarshal([]byte(last), &m); err != nil || m["status"] != "released" {
		t.Errorf("the last line of run -o json's stdout is %q (%v), want run's result (status released) alone\n%s", last, err, r)
	}
}

// waitFile waits up to a minute for path to exist.
func waitFile(t *testing.T, path string, stderr fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute\nstderr: %s", path, stderr)
		}
	}
}

// A signal to run while CMD runs is passed on to CMD, "which decides":
// run then exits as CMD's end and the lease's fate say (CMD's code, 6 on
// a loss), not 130. A served store that withdraws run's bearer token is
// the loss that exits 7 (the exit codes table: "also when it refused
// run's renewals while CMD ran"); after a SIGTERM that CMD ignored, run
// exits 130 instead, while its -o json result says unauthorized (which
// the table gives 7), and in table mode stderr says only "interrupted
// ... before leasectl run finished": the withdrawn token goes unsaid.
func TestServedRunWhoseTokenIsWithdrawnAfterASignalExits7(t *testing.T) {
	t.Parallel()
	for _, output := range []string{"json", "table"} {
		t.Run(output, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tokens := writeTokens(t, dir, e2eTokens)
			s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "run.db"), nil, "--tokens", tokens)
			c := leasectl{dir: dir, dsn: s.url}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			started, termed := filepath.Join(dir, "started"), filepath.Join(dir, "termed")
			cmd := c.command(ctx, "-o", output, "run", "e2e/job", "--owner", "w1", "--grace", "1s", "--",
				"sh", "-c", `trap 'touch "$1"' TERM; touch "$0"; while :; do sleep 0.05; done`, started, termed)
			cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+e2eWriter)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal: signals go on to CMD's group
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			waitFile(t, started, cmd.Stderr.(fmt.Stringer))
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitFile(t, termed, cmd.Stderr.(fmt.Stringer)) // passed on; CMD carries on
			writeTokens(t, dir, strings.ReplaceAll(e2eTokens, e2eWriter+" writer e2e\n", ""))
			if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				r := finish(t, cmd, cmd.Args[1:], err)
				// Table mode says why on stderr; -o json in its result.
				status, said := "unauthorized", r.stderr
				if output == "json" {
					m := r.obj(t)
					status, _ = m["status"].(string)
					said, _ = m["message"].(string)
				}
				if r.code != 7 || status != "unauthorized" {
					t.Fatalf("run whose token the server withdrew while CMD ran, after a SIGTERM CMD ignored: exit %d, status %v; want exit 7 and status unauthorized\n%s", r.code, status, r)
				}
				if !strings.Contains(said, "LEASESTORE_API_TOKEN") || strings.Contains(said, "interrupted") {
					t.Errorf("run -o %s whose token the server withdrew after a SIGTERM CMD ignored does not name LEASESTORE_API_TOKEN, or says interrupted:\n%s\n%s", output, said, r)
				}
			case <-time.After(time.Minute):
				t.Fatalf("run did not end within a minute of its token's withdrawal: %s", cmd.Stderr)
			}
		})
	}
}
