package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// checkFormat returns why the file at path (no #! script naming an
// interpreter: checkInterpreter follows those) certainly cannot be
// executed: the kernel knows no format for it (exec format error,
// ENOEXEC: a script without a #! line, or whose #! line names no
// interpreter, a text or data file); nil when it may run, or when that
// cannot be told. An ELF file runs (as far as its format goes); any
// other, one beginning with #! too, is tried, as binfmt_misc may know its
// format (a Java archive, a Windows program under Wine, an interpreter
// registered by extension), and what binfmt_misc knows need not be
// visible here (a container): the file is executed under ptrace, which
// stops the new program before it runs a single instruction, and killed.
// Only that exec's ENOEXEC refuses the file.
func checkFormat(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // executable but unreadable: only the start can tell
	}
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	f.Close()
	if bytes.Equal(head[:n], []byte("\x7fELF")) {
		return nil
	}
	return probeExec(path)
}

// probeExec executes path stopped at once (see checkFormat) and returns
// the exec's error when it is ENOEXEC, nil otherwise (it started, or
// failed for a reason the real start may not meet, such as a ptrace
// refused by a seccomp filter or Yama).
func probeExec(path string) error {
	c := &exec.Cmd{Path: path, Args: []string{path}, Env: []string{}}
	// Ptrace makes the child stop (SIGTRAP) once its execve succeeded;
	// Pdeathsig kills it if run dies before it is killed, which would
	// otherwise let it go on (a tracee is resumed when its tracer ends).
	c.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	errc := make(chan error, 1)
	go func() {
		// The tracer, and the parent Pdeathsig watches, is this thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			errc <- err
			return
		}
		_ = c.Process.Kill()
		_ = c.Wait()
		errc <- nil
	}()
	if err := <-errc; errors.Is(err, syscall.ENOEXEC) {
		return err
	}
	return nil
}
