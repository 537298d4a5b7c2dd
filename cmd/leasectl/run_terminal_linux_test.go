package main

// leasectl run in a terminal: the signals the terminal sends the whole
// foreground group reach CMD once.

import (
	"bufio"
	"context"
	"path/filepath"
	"strings"
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
