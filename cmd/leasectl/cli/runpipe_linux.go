package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeCapacity is how many bytes the pipe r reads from can hold
// (F_GETPIPE_SZ), or maxPipeCapacity when that cannot be read. It reads
// through SyscallConn, not Fd, which would make r's reads blocking ones
// that a Close cannot end.
func pipeCapacity(r *os.File) int64 {
	rc, err := r.SyscallConn()
	if err != nil {
		return maxPipeCapacity
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil || n <= 0 {
		return maxPipeCapacity
	}
	return int64(n)
}
