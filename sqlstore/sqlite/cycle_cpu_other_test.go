//go:build !unix

package sqlite_test

import "time"

// processCPU reports that this platform's CPU time is not read.
func processCPU() (time.Duration, bool) { return 0, false }
