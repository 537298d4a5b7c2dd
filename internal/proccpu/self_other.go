//go:build !unix

package proccpu

import "time"

// Self returns 0: this system's process CPU time is not read.
func Self() time.Duration { return 0 }
