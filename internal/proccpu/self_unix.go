//go:build unix

package proccpu

import (
	"syscall"
	"time"
)

// Self returns the CPU time (user and system) this process has used, or
// 0 when the system does not say.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
