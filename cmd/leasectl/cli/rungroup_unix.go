//go:build unix

package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are those run catches while its command runs, and
// passes on to it unless commandGroup.forwards says otherwise.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2}

// stopSignals interrupt run until its command starts, as SIGINT and
// SIGTERM do (main cancels the command's context on those): their default
// action would end run at once, leaving a lease it took to run out.
var stopSignals = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT}

// commandGroup is run's command and every process it starts: CMD runs in
// a process group of its own, and signals go to the whole group, so that
// a loss stops what CMD started too (a shell's children, a worker pool)
// and not only CMD. In a terminal (run is in the foreground of its
// controlling terminal, whatever its stdin is) CMD stays in run's group,
// so that job control works as for any command (CMD reads from the
// terminal, Ctrl-C and Ctrl-Z reach it), signals go to CMD alone, and
// those the terminal or the shell send the whole group are not passed on
// (see forwards). Not safe for concurrent use.
type commandGroup struct {
	proc        *os.Process // CMD, once started
	pgid        int         // the group's id (CMD's pid), 0 in a terminal
	interactive bool
	leader      bool // in a terminal: run leads its session
}

// prepare makes c start in a group of its own unless run is in the
// foreground of its controlling terminal (see commandGroup). Stdin does
// not decide: with stdin redirected at a shell prompt (run k -- job <
// file), Ctrl-Z must still stop CMD with run.
func (g *commandGroup) prepare(c *exec.Cmd) {
	if tty, err := os.Open(controllingTerminal); err == nil {
		pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
		_ = tty.Close()
		if g.interactive = err == nil && pgrp == syscall.Getpgrp(); g.interactive {
			sid, err := unix.Getsid(0)
			g.leader = err == nil && sid == os.Getpid()
			return
		}
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// started records the started command.
func (g *commandGroup) started(p *os.Process) {
	g.proc = p
	if !g.interactive {
		g.pgid = p.Pid
	}
}

// forwards reports whether run passes sig on to the group. Always, except
// in a terminal, where CMD shares run's process group and hears directly
// what is sent to the whole group: SIGINT and SIGQUIT, which the terminal
// sends its foreground group on Ctrl-C and Ctrl-\, and SIGHUP, which on a
// hangup the shell sends its jobs (and the kernel the foreground group
// when the session leader exits). Passed on as well, each would reach CMD
// twice, and a command that quits hard on a second interrupt would abort
// on one Ctrl-C. SIGHUP is passed on when run leads its session (a
// terminal emulator or tmux started it, or a shell exec'd it): a
// hangup signals only the session leader, so CMD would not hear it
// otherwise. The price: in a terminal, SIGINT or SIGQUIT sent to run
// alone (kill -INT with run's pid) does not reach CMD. Go gives no way to
// tell who sent a signal.
func (g *commandGroup) forwards(sig os.Signal) bool {
	if !g.interactive {
		return true
	}
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT:
		return false
	case syscall.SIGHUP:
		return g.leader
	}
	return true
}

// signal sends sig to every process of the group (to CMD alone in a
// terminal).
func (g *commandGroup) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	switch {
	case !ok:
	case g.pgid > 0:
		_ = syscall.Kill(-g.pgid, s)
	case g.proc != nil:
		_ = g.proc.Signal(s) // refuses once CMD was waited for: no reused pid is hit
	}
}

// controllingTerminal is the path prepare opens to find run's terminal
// (a variable for tests, which may run in one).
var controllingTerminal = "/dev/tty"

// procRoot is where alive reads the processes' states (a variable for
// tests).
var procRoot = "/proc"

// alive reports whether a process of the group still runs; false in a
// terminal, where what CMD started is out of reach. kill(-pgid, 0)
// decides, except that a group /proc shows only as zombies (which an
// init that does not reap can leave behind) has ended. A group kill finds
// but /proc does not show (hidepid, another user's processes, no /proc)
// runs.
func (g *commandGroup) alive() bool {
	if g.pgid <= 0 || errors.Is(syscall.Kill(-g.pgid, 0), syscall.ESRCH) {
		return false // EPERM: processes of another user are left, and count
	}
	stats, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*", "stat"))
	zombies := false
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold anything, so
		// fields are read after its last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 {
			continue
		}
		if pgrp, err := strconv.Atoi(f[2]); err != nil || pgrp != g.pgid {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return true
		}
		zombies = true
	}
	return !zombies
}
