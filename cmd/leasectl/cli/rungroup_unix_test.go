//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGroupAliveBelievesKillOverAHiddenProc: alive asks kill(-pgid, 0)
// and reads /proc only to tell a group of zombies from a live one. Where
// /proc does not show the group's processes (mounted with hidepid, or
// they belong to another user) they still run, and run must not release
// beside them. The old alive trusted a /proc that listed any process and
// answered false for a group it could not see.
func TestGroupAliveBelievesKillOverAHiddenProc(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	pid := sleep.Process.Pid
	g := &commandGroup{proc: sleep.Process, pgid: pid}

	// fakeProc makes a /proc holding one process's stat line.
	fakeProc := func(statPid int, state string, pgrp int) string {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprint(statPid)), 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (odd) name) %s 1 %d %d 0 -1\n", statPid, state, pgrp, pgrp)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(statPid), "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name string
		root string
		want bool
	}{
		{"the real /proc", "/proc", true},
		{"a /proc that hides the group", fakeProc(1, "S", 1), true},
		{"a /proc that shows the group as zombies", fakeProc(pid, "Z", pid), false},
		{"a /proc that shows the group running", fakeProc(pid, "S", pid), true},
		{"no /proc", filepath.Join(t.TempDir(), "none"), true},
	} {
		procRoot = tc.root
		if got := g.alive(); got != tc.want {
			t.Errorf("%s: alive() = %v, want %v", tc.name, got, tc.want)
		}
	}
	procRoot = "/proc"

	_ = sleep.Process.Kill()
	_ = sleep.Wait()
	if g.alive() {
		t.Error("alive() after the group's only process ended and was reaped: true, want false")
	}
	if (&commandGroup{proc: sleep.Process}).alive() {
		t.Error("alive() in a terminal (no group): true, want false")
	}
}

// aliveProbeEnv names the group aliveProbe asks about.
const aliveProbeEnv = "LEASESTORE_TEST_ALIVE_PGID"

// aliveProbe, in the test binary started by TestGroupAliveCountsWhatItMayNotSignal,
// prints alive() of the group named in aliveProbeEnv and reports true;
// elsewhere it does nothing and reports false.
func aliveProbe() bool {
	pgid, err := strconv.Atoi(os.Getenv(aliveProbeEnv))
	if err != nil {
		return false
	}
	fmt.Println((&commandGroup{pgid: pgid}).alive())
	return true
}

// nobodysCopy returns a copy of this test binary that user nobody may
// run, and the directory (0755) that holds it, removed after t. A caller
// runs it with an environment that makes TestMain do one thing (see
// aliveProbe, pausedRead) instead of running the tests. Not from a
// parallel test: a process forked meanwhile could hold the copy open for
// writing, and running it would fail (ETXTBSY).
func nobodysCopy(t *testing.T) (probe, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err = os.MkdirTemp("", "nobodys-copy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	probe = filepath.Join(dir, "probe")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return probe, dir
}

// TestGroupAliveCountsWhatItMayNotSignal: a group run may not signal
// (kill answers EPERM: its processes now belong to another user, after a
// setuid or a su in CMD) still runs. The old alive counted any error from
// kill(-pgid, 0) as "none left", and run released beside them.
func TestGroupAliveCountsWhatItMayNotSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to ask as another user about root's group")
	}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })

	probe, dir := nobodysCopy(t)
	cmd := exec.Command(probe)
	cmd.Dir = dir
	cmd.Env = []string{aliveProbeEnv + "=" + strconv.Itoa(sleep.Process.Pid)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the probe as user nobody: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "true" {
		t.Fatalf("alive() of a running group another user asks about: %s, want true", got)
	}
}

// TestRunStopsLeftoversHoldingItsPipes: with streams that are not files
// (Execute given buffers, as a program embedding leasectl does), CMD's
// output reaches them through pipes, which a process CMD leaves running
// holds open. run must still see CMD end, stop the leftover and release.
// Before, c.Wait waited for the pipes to close: run hung for as long as
// the leftover ran, holding the lease.
func TestRunStopsLeftoversHoldingItsPipes(t *testing.T) {
	// Not in a terminal, whatever the test runs in: there CMD stays in
	// run's group and what it leaves is out of reach (not parallel: the
	// variable is the package's).
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty")
	t.Cleanup(func() { controllingTerminal = "/dev/tty" })
	e := sqliteEnv(t)
	pidfile := filepath.Join(t.TempDir(), "leftover.pid")
	done := make(chan outcome, 1)
	go func() {
		done <- runCLI(t, e, "run", "piped", "--grace", "2s", "--", "sh", "-c",
			`sleep 300 & echo $! > "$0"; echo started`, pidfile)
	}()
	select {
	case o := <-done:
		wantCode(t, o, 0)
		if !strings.Contains(o.stdout, "started") || !strings.Contains(o.stderr, "left processes running") {
			t.Fatalf("run's output lacks the command's line or the warning\nstdout: %s\nstderr: %s", o.stdout, o.stderr)
		}
	case <-time.After(30 * time.Second):
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		<-done
		t.Fatal("run did not end within 30s of its command's end: it waited for the leftover holding its pipes")
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); f[0] != "Z" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the leftover still runs after run ended")
		}
	}
	wantCode(t, runCLI(t, e, "get", "piped"), 4)
}

// TestRunReleasesOnlyOnceTheKilledGroupIsGone: a process ends some time
// after SIGKILL (one in the middle of a write to a slow disk only once the
// write returns), and run must not release while one of CMD's group is
// still there: another holder could start beside it. run waits, up to
// killWait, for the group to vanish; when some process outlives that, it
// does not release at all (the lease runs out after its TTL). SIGURG,
// which sleep ignores, stands in for a SIGKILL that a process outlives for
// a while; the test ends the process itself. The old run released as soon
// as it had sent SIGKILL to a group whose command had ended.
func TestRunReleasesOnlyOnceTheKilledGroupIsGone(t *testing.T) {
	// Not in a terminal, whatever the test runs in (not parallel: the
	// variables are the package's).
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty")
	groupKill = syscall.SIGURG
	t.Cleanup(func() {
		controllingTerminal, groupKill, killWait = "/dev/tty", syscall.SIGKILL, 5*time.Second
	})
	for _, tc := range []struct {
		name   string
		wait   time.Duration // killWait
		vanish bool          // the test ends the process before killWait passed
	}{
		{"vanishes", time.Minute, true},
		{"outlives", time.Second, false},
	} {
		killWait = tc.wait
		e := sqliteEnv(t)
		pidfile := filepath.Join(t.TempDir(), "stubborn.pid")
		done := make(chan outcome, 1)
		go func() {
			// The grandchild ignores SIGTERM and outlives the command.
			done <- runCLI(t, e, "run", "stubborn", "--grace", "200ms", "--", "sh", "-c",
				`(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & echo $! > "$0"`, pidfile)
		}()
		pid := readPidFile(t, pidfile)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		if tc.vanish {
			select {
			case o := <-done:
				t.Fatalf("%s: run ended (exit %d) while a process of the group it killed still ran: it released beside it\nstderr: %s",
					tc.name, o.code, o.stderr)
			case <-time.After(2 * time.Second):
			}
			wantCode(t, runCLI(t, e, "get", "stubborn"), 0) // still held
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		o := awaitRun(t, done, pid, 30*time.Second, tc.name)
		wantCode(t, o, 0)
		if !strings.Contains(o.stderr, "outlived its grace period") {
			t.Fatalf("%s: run did not kill the group\nstderr: %s", tc.name, o.stderr)
		}
		if tc.vanish {
			wantCode(t, runCLI(t, e, "get", "stubborn"), 4) // released once the group was gone
			continue
		}
		if !strings.Contains(o.stderr, "not releasing the lease") {
			t.Fatalf("%s: run does not say it left the lease to run out\nstderr: %s", tc.name, o.stderr)
		}
		wantCode(t, runCLI(t, e, "get", "stubborn"), 0) // left to run out after its TTL
	}
}

// TestRunBoundedWhenTheKilledCommandLingers: after SIGKILL run waits up to
// killWait for the group, CMD itself included: a CMD that the kill leaves
// running a while (in the middle of a write to a slow disk) must not keep
// run, whose lease is lost, from exiting 6 after that bound, without a
// release. SIGURG, which sleep ignores, stands in for that SIGKILL. The old
// run started the bound only once CMD had been reaped, and waited forever.
func TestRunBoundedWhenTheKilledCommandLingers(t *testing.T) {
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty")
	groupKill, killWait = syscall.SIGURG, time.Second
	t.Cleanup(func() {
		controllingTerminal, groupKill, killWait = "/dev/tty", syscall.SIGKILL, 5*time.Second
	})
	e := sqliteEnv(t)
	pidfile := filepath.Join(t.TempDir(), "cmd.pid")
	done := make(chan outcome, 1)
	go func() {
		// Files, not buffers, for output: no copying goroutine of
		// os/exec's outlives run while the command lingers.
		dir := t.TempDir()
		stdout, err1 := os.Create(filepath.Join(dir, "stdout"))
		stderr, err2 := os.Create(filepath.Join(dir, "stderr"))
		if err := errors.Join(err1, err2); err != nil {
			done <- outcome{code: -1, stderr: err.Error()}
			return
		}
		defer stdout.Close()
		defer stderr.Close()
		code := Execute(context.Background(), []string{"run", "lingers", "--grace", "200ms", "--", "sh", "-c",
			`echo $$ > "$0"; trap '' TERM; exec sleep 300`, pidfile}, nil, stdout, stderr, e.get)
		out, _ := os.ReadFile(stdout.Name())
		errs, _ := os.ReadFile(stderr.Name())
		done <- outcome{stdout: string(out), stderr: string(errs), code: code}
	}()
	pid := readPidFile(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	wantCode(t, runCLI(t, e, "revoke", "lingers", "--reason", "test"), 0)
	o := awaitRun(t, done, pid, 20*time.Second, "lingering command after a loss")
	wantCode(t, o, ExitLost)
	for _, want := range []string{"outlived its grace period", "still run after SIGKILL"} {
		if !strings.Contains(o.stderr, want) {
			t.Fatalf("run does not say %q\nstderr: %s", want, o.stderr)
		}
	}
}

// readPidFile waits up to 30s for a command to write its pid, a line, to
// path, and returns it.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s within 30s: the command did not start", path)
		}
	}
}

// awaitRun returns run's outcome from done, or fails the test (after
// killing pid, which keeps run going) when run did not end within d.
func awaitRun(t *testing.T, done <-chan outcome, pid int, d time.Duration, what string) outcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(d):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%s: run did not end within %v while a process of its group was there", what, d)
		return outcome{}
	}
}
