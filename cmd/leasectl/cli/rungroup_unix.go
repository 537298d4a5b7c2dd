//go:build unix

package cli

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// commandGroup is run's command and every process it starts: CMD runs in
// a process group of its own, and signals go to the whole group, so that
// a loss stops what CMD started too (a shell's children, a worker pool)
// and not only CMD. In a terminal (stdin is the terminal and run is in its
// foreground) CMD stays in run's group, so that job control works as for
// any command (CMD reads from the terminal, Ctrl-C and Ctrl-Z reach it),
// and signals go to CMD alone. Not safe for concurrent use.
type commandGroup struct {
	proc        *os.Process // CMD, once started
	pgid        int         // the group's id (CMD's pid), 0 in a terminal
	interactive bool
}

// prepare makes c start in a group of its own unless run is in the
// foreground of the terminal that stdin is (see commandGroup).
// The terminal is the controlling one, whatever stdin is: with stdin
// redirected at a shell prompt, Ctrl-Z must still stop CMD with run.
func (g *commandGroup) prepare(c *exec.Cmd, _ io.Reader) {
	if tty, err := os.Open("/dev/tty"); err == nil {
		pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
		_ = tty.Close()
		if g.interactive = err == nil && pgrp == syscall.Getpgrp(); g.interactive {
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

// alive reports whether a process of the group still runs (zombies, which
// an init that does not reap can leave behind, do not count); false in a
// terminal, where what CMD started is out of reach.
func (g *commandGroup) alive() bool {
	if g.pgid <= 0 || errors.Is(syscall.Kill(-g.pgid, 0), syscall.ESRCH) {
		return false // EPERM: processes of another user are left, and count
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 { // no /proc: believe kill
		return true
	}
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
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pgrp, err := strconv.Atoi(f[2]); err == nil && pgrp == g.pgid {
			return true
		}
	}
	return false
}
