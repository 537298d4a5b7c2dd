//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asNobody makes cmd (made by command) run as nobody.
func asNobody(cmd *exec.Cmd) *exec.Cmd { return asUser(cmd, 65534) }

// asUser makes cmd (made by command) run as the user id, in the group of
// the same id.
func asUser(cmd *exec.Cmd, id uint32) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id}}
	return cmd
}

// awaitLine waits up to 5s for a line of lines holding want, skipping the
// others; it fails naming what when none comes.
func awaitLine(t *testing.T, lines <-chan string, want, what string, cmd *exec.Cmd) {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the follower ended without printing %s; stderr: %s", what, want, cmd.Stderr)
			}
			if strings.Contains(line, want) {
				return
			}
		case <-timer.C:
			t.Fatalf("%s: printed nothing holding %s in 5s; stderr: %s", what, want, cmd.Stderr)
		}
	}
}

// A user who may read a SQLite store but not write its directory follows
// the audit trail (audit --follow) or watches it (watch). When no writer
// had the file open at that moment (no -wal file), leasectl opened it
// immutable=1, "sound for as long as nobody writes meanwhile": a follower
// is meant to run while others write, and it then never saw a new record,
// silently, although a one-shot `leasectl audit` by the same user read
// them. SQLite cannot read a WAL file in a directory this user cannot
// write but through its -wal and -shm files, which only a writer can make:
// a follower started then is refused at once, naming what to do. Started
// while a writer has the store open, it sees every later commit of other
// processes, also after that writer exited (its connection keeps the
// -wal and -shm files).
func TestReadOnlyFollowerSeesLaterWrites(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leasectl as another user (nobody)")
	}
	dir := t.TempDir()
	owner := leasectl{dir: dir}
	if r := owner.run(t, "acquire", "first", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire\n%s", r)
	}
	openUp(t, dir) // 0755: nobody reads the directory and the 0644 file, writes neither
	wal := filepath.Join(dir, "leasestore.db-wal")
	if _, err := os.Stat(wal); err == nil {
		t.Fatal("a -wal file is left after the writer exited")
	}

	// No writer has the store open: a follower could only read the file
	// as it is now. It is refused at once, saying what to do; a one-shot
	// read works.
	for _, args := range [][]string{
		{"audit", "--follow", "--since", "1h", "--interval", "50ms", "-o", "json"},
		{"watch", "--interval", "50ms", "-o", "json"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := asNobody(owner.command(ctx, args...))
		start := time.Now()
		r := finish(t, cmd, args, cmd.Run())
		cancel()
		if r.code != 5 || time.Since(start) > 15*time.Second {
			t.Fatalf("%v with no writer, by a user who cannot write the store's directory: exit %d after %v, "+
				"want a refusal (exit 5) at once\n%s", args, r.code, time.Since(start).Round(time.Millisecond), r)
		}
		for _, want := range []string{"no later commit would show", "while a writer has the store open",
			"write access to the file and its directory", "--dsn http://"} {
			if !strings.Contains(r.stdout+r.stderr, want) { // -o json: the refusal is the JSON answer
				t.Errorf("%v refused without saying %q\n%s", args, want, r)
			}
		}
		if strings.Contains(r.stdout, `"key":"first"`) {
			t.Errorf("%v printed records before refusing\n%s", args, r)
		}
	}
	if r := asOtherUser(t, dir, "audit", "--key", "first"); r.code != 0 || !strings.Contains(r.stdout, "first") {
		t.Fatalf("a one-shot audit by the same user\n%s", r)
	}

	// A writer (here leasectl run, holding a lease while cat reads its
	// stdin) has the store open.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer := owner.command(ctx, "run", "hold", "--owner", "x", "--ttl", "1m", "--", "cat")
	stdin, err := writer.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = writer.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(wal); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("the writer made no -wal file: %v; stderr: %s", err, writer.Stderr)
		}
	}

	follow := asNobody(owner.command(ctx, "audit", "--follow", "--since", "1h", "--interval", "50ms", "-o", "json"))
	followed := startLines(t, follow)
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	watch := asNobody(owner.command(ctx, "watch", "--since", "1h", "--interval", "50ms", "-o", "json"))
	watched := startLines(t, watch)
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	awaitLine(t, followed, `"key":"first"`, "audit --follow's first page", follow)
	awaitLine(t, watched, `"key":"first"`, "watch's first records", watch)

	// The owner (a service, another operator) writes on, in processes of
	// its own.
	if r := owner.run(t, "acquire", "second", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire second\n%s", r)
	}
	awaitLine(t, followed, `"key":"second"`, "audit --follow by a user who cannot write the store's directory, "+
		"after another process's acquire committed", follow)
	awaitLine(t, watched, `"key":"second"`, "watch by a user who cannot write the store's directory, "+
		"after another process's acquire committed", watch)

	// The writer that had the store open when they started exits.
	_ = stdin.Close()
	if err := writer.Wait(); err != nil {
		t.Fatalf("the writer: %v; stderr: %s", err, writer.Stderr)
	}
	if r := owner.run(t, "acquire", "third", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire third\n%s", r)
	}
	awaitLine(t, followed, `"key":"third"`, "audit --follow, once the writer it started beside exited", follow)
	awaitLine(t, watched, `"key":"third"`, "watch, once the writer it started beside exited", watch)
}
