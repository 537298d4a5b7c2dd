//go:build !linux

package cli

import "os/exec"

// startCommand starts c and returns a channel that gets c.Wait's result.
// Only Linux ties CMD's life to run's (see its version): elsewhere CMD
// runs on when run itself is killed.
func startCommand(c *exec.Cmd) (<-chan error, error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	return done, nil
}
