//go:build !linux

package sqlite_test

import (
	"fmt"
	"os"
)

// fullDiskWorkerMode is the full-disk worker of fulldisk_test.go (Linux
// only: no test starts one elsewhere).
const fullDiskWorkerMode = "fulldisk"

func runFullDiskWorker() int {
	fmt.Fprintln(os.Stderr, "the full-disk worker runs on Linux only")
	return 1
}

// fillDiskNowAndThen is Linux only (a file-size cap on the process); no
// test sets lincheckFullDiskEnv elsewhere, so this closes done at once.
func fillDiskNowAndThen(_ string, _ <-chan struct{}, done chan<- struct{}) { close(done) }

// noFileWorkerMode is the open-files worker of exhaustion_test.go (Linux
// only: no test starts one elsewhere).
const noFileWorkerMode = "nofile"

func runNoFileWorker() int {
	fmt.Fprintln(os.Stderr, "the open-files worker runs on Linux only")
	return 1
}
