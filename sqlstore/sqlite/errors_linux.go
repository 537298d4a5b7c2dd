package sqlite

import (
	"math"
	"os"
	"syscall"
)

// openProbe opens a file and closes it, and returns the error of the open:
// EMFILE or ENFILE when the process or the system is at its limit of open
// files.
func openProbe() error {
	f, err := os.Open(os.DevNull)
	if err == nil {
		_ = f.Close()
	}
	return err
}

// openFilesLimit returns the process's limit of open files (RLIMIT_NOFILE).
func openFilesLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return lim.Cur, true
}

// fileSystemRoom returns the bytes this process can still write on the file
// system holding dir (root may use the blocks reserved for it) and its
// free inodes: math.MaxUint64 on a file system that counts none (btrfs, a
// tmpfs with nr_inodes=0 report 0 of 0), whose inodes never run out.
func fileSystemRoom(dir string) (room int64, inodes uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	inodes = st.Ffree
	if st.Files == 0 {
		inodes = math.MaxUint64
	}
	return int64(blocks) * int64(st.Bsize), inodes, true
}
