package cli

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startCommand starts c and returns a channel that gets c.Wait's result.
// CMD gets SIGKILL when run dies (Pdeathsig), so that a run killed
// itself (SIGKILL: the OOM killer, a supervisor's hard stop) leaves no
// CMD working on past the lease nobody renews any more, beside the next
// holder. The signal comes when the thread that started CMD ends, not
// the process: CMD is started from a goroutine locked to its thread,
// which stays (still locked) until CMD has been waited for. It covers CMD
// itself, not the processes CMD started, and the kernel drops it when
// CMD executes a set-user-ID or set-group-ID program or one with file
// capabilities (sudo).
func startCommand(c *exec.Cmd) (<-chan error, error) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once CMD can no longer be signalled for the
		// thread's end: not started, or waited for. A goroutine that ends
		// locked ends its thread.
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- c.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
