package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// runUnread runs leasectl -o json run with args in the background, its
// stdout a pipe of one page that nobody reads until drain is called; drain
// reads it all and returns it with run's exit code.
func runUnread(t *testing.T, e env, args ...string) (stderr *syncbuf.Buffer, drain func() (string, int)) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, os.Getpagesize()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	stderr = &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, append([]string{"-o", "json", "run"}, args...), nil, w, stderr, e.get)
		_ = w.Close()
	}()
	drain = func() (string, int) {
		defer cancel()
		out, _ := io.ReadAll(r)
		_ = r.Close()
		return string(out), <-done
	}
	t.Cleanup(func() {
		cancel()
		_ = r.Close()
	})
	return stderr, drain
}

// waitFile waits up to d for path to exist.
func waitFile(path string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// run -o json passes CMD's output through itself (to see whether it ended
// a line before run's result). Its handling of the lease must never wait
// for leasectl's stdout: with a stdout nobody reads, run releases the
// lease as soon as CMD has ended, and after a loss stops CMD within its
// grace without calling it a survivor of SIGKILL; the output and the
// result follow once stdout is read.
func TestRunJSONHandlesTheLeaseWhileStdoutIsUnread(t *testing.T) {
	t.Parallel()
	const size = 3 * 4096 // more than the stdout pipe holds, less than CMD's own pipe
	t.Run("released", func(t *testing.T) {
		t.Parallel()
		e := sqliteEnv(t)
		ended := filepath.Join(t.TempDir(), "ended")
		stderr, drain := runUnread(t, e, "k", "--", "sh", "-c", fmt.Sprintf(`head -c %d /dev/zero; touch "$1"`, size), "sh", ended)
		if !waitFile(ended, 10*time.Second) {
			out, code := drain()
			t.Fatalf("the command did not end in 10s (exit %d, %d bytes)\nstderr: %s", code, len(out), stderr.String())
		}
		status := ""
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if status, _ = runCLI(t, e, "get", "k", "-o", "json").json(t)["status"].(string); status == "not_found" {
				break
			}
		}
		if status != "not_found" {
			t.Errorf("5s after the command ended, its stdout unread, get k answers %s: run did not release the lease "+
				"before its stdout was read; want not_found", status)
		}
		out, code := drain()
		if code != 0 {
			t.Fatalf("run exited %d, want 0\nstderr: %s", code, stderr.String())
		}
		ranJSON(t, outcome{stdout: out, stderr: stderr.String()}, string(bytes.Repeat([]byte{0}, size)), "released", "exited 0")
	})
	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		e := sqliteEnv(t)
		started := filepath.Join(t.TempDir(), "started")
		// CMD writes until it is stopped: its own pipe fills too.
		stderr, drain := runUnread(t, e, "k", "--grace", "1s", "--", "sh", "-c", `touch "$1"; exec cat /dev/zero`, "sh", started)
		if !waitFile(started, 10*time.Second) {
			out, code := drain()
			t.Fatalf("the command did not start in 10s (exit %d, %d bytes)\nstderr: %s", code, len(out), stderr.String())
		}
		wantCode(t, runCLI(t, e, "revoke", "k", "--reason", "test"), ExitOK)
		time.Sleep(4 * time.Second) // the grace, and then some
		if log := stderr.String(); strings.Contains(log, "outlived") || !strings.Contains(log, "lease was lost") {
			t.Errorf("run's log 4s after the revoke, its stdout unread (grace 1s):\n%s\nwant the loss heard and CMD stopped "+
				"by SIGTERM, not killed after the grace nor taken for a survivor of SIGKILL", log)
		}
		out, code := drain()
		if code != ExitLost {
			t.Fatalf("run exited %d, want %d\nstderr: %s", code, ExitLost, stderr.String())
		}
		last := out[strings.LastIndexByte(strings.TrimRight(out, "\n"), '\n')+1:]
		if m := (outcome{stdout: last, stderr: stderr.String()}).json(t); m["status"] != "revoked" && m["status"] != "not_found" {
			t.Errorf("run's result after the revoke: %v", m)
		}
	})
}
