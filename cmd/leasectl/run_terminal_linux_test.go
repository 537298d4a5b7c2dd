package main

// leasectl run in a terminal: the signals the terminal (or the shell)
// sends the whole foreground group reach CMD once.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
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
// CMD in its own process group, so that job control works as for any
// command (Ctrl-C and Ctrl-Z reach CMD directly). A Ctrl-C then reaches
// CMD from the terminal, and reaches run too, which must not pass it on:
// it did, and CMD got SIGINT twice for one Ctrl-C. A command that shuts
// down gracefully on the first interrupt and gives up at once on the
// second (terraform, docker compose, many servers) was thus made to abort
// by a single Ctrl-C under leasectl run, where it would have cleaned up
// when run directly.
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

// signalCounter is a command that counts the SIGHUPs and SIGTERMs it
// receives, as sigintCounter counts SIGINTs, after printing its parent's
// pid (run's) and its process group.
const signalCounter = `
import os, signal
sigs = {signal.SIGHUP, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
print("ready run=%d pgrp=%d" % (os.getppid(), os.getpgrp()), flush=True)
got = {signal.SIGHUP: 0, signal.SIGTERM: 0}
while True:
    info = signal.sigtimedwait(sigs, 2 if sum(got.values()) else 30)
    if info is None:
        break
    got[info.si_signo] += 1
print("signals HUP=%d TERM=%d" % (got[signal.SIGHUP], got[signal.SIGTERM]), flush=True)
`

// TestRunInATerminalHangupReachesTheCommandOnce: in a terminal, run does
// not pass on a SIGHUP its whole group got (a shell's SIGHUP to its job on
// a hangup, or the kernel's to the foreground group when the session
// leader exits): CMD, in that group, got it too. When run leads its
// session (a terminal emulator or tmux started it, or a shell exec'd it),
// a hangup signals run alone, and run passes it on, or CMD would never
// hear it.
// SIGTERM, which nothing sends the group, is passed on either way.
func TestRunInATerminalHangupReachesTheCommandOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shell bool
	}{
		{"run leads its session", false},
		{"a shell leads the session", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := c.command(ctx, "run", "tty-hup", "--", "python3", "-c", signalCounter)
			if tc.shell {
				// A shell without job control leads the session, with run
				// in its process group, the terminal's foreground one; it
				// outlives the SIGHUP to the group.
				script := `trap : HUP; "$0" "$@"; echo "run-exit-$?"`
				cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", script, bin}, cmd.Args[1:]...)...)
				cmd.Dir, cmd.Env = c.dir, c.command(ctx).Env
			}
			cmd.Stdout, cmd.Stderr = nil, nil
			ptmx, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer ptmx.Close()
			expect := terminalLines(t, ptmx)
			line := expect("ready ")
			var run, pgrp int
			if _, err := fmt.Sscanf(line[strings.Index(line, "ready "):], "ready run=%d pgrp=%d", &run, &pgrp); err != nil {
				t.Fatalf("ready line %q: %v", line, err)
			}
			// A signal sent while the same one is pending is lost: a
			// second SIGHUP from run may merge with the first when CMD
			// has not taken that yet. Three rounds, apart, catch a SIGHUP
			// passed on that should not be all but always.
			const rounds = 3
			for range rounds {
				hup := run // a hangup signals the session leader
				if tc.shell {
					hup = -pgrp // the shell's group: the shell, run and CMD
				}
				if err := syscall.Kill(hup, syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
			}
			if err := syscall.Kill(run, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			got := expect("signals ")
			if err := cmd.Wait(); err != nil {
				t.Logf("%s: %v", cmd.Path, err)
			}
			if want := fmt.Sprintf("HUP=%d TERM=1", rounds); !strings.Contains(got, want) {
				t.Fatalf("%d SIGHUPs (to the group when a shell leads the session, to run when run does), then SIGTERM to run: "+
					"the command under run got %q, want %s", rounds, got, want)
			}
		})
	}
}

// terminalLines reads the lines ptmx shows; the function it returns waits
// (up to 30 s) for one that contains want and returns it.
func terminalLines(t *testing.T, ptmx io.Reader) func(want string) string {
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	var seen []string
	return func(want string) string {
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
}
