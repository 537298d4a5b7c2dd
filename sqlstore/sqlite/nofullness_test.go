//go:build linux

package sqlite_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestOpenOfADirectoryOnAFileSystemWithoutInodeCountsIsNoFullDisk shows
// that a path that cannot be opened for a reason other than room (here it
// names a directory) is not called a full disk on a file system that
// reports no inode counts (statfs f_files = f_ffree = 0: btrfs, a tmpfs
// mounted nr_inodes=0, many FUSE file systems), where it has plenty of
// room. The SQLITE_CANTOPEN path asks statfs and takes "no free inode" for
// a full disk, so Open answers "the disk is full: free space on the file
// system holding ..." and matches ErrDiskFull (leasectl then does not
// retry and the operator frees space for nothing); on ext4 the same path
// answers "cannot be opened: check that the path names a file ...".
func TestOpenOfADirectoryOnAFileSystemWithoutInodeCountsIsNoFullDisk(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Plenty of room, and no inode limit: statfs reports 0 inodes, 0 free.
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,nr_inodes=0", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	path := filepath.Join(dir, "leases.db")
	if err := os.Mkdir(path, 0o755); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := sqlite.Open(ctx, path, nil)
	if err == nil {
		_ = b.Close(context.Background())
		t.Fatal("Open of a directory succeeded")
	}
	t.Logf("Open of a directory on a tmpfs with room: %v", err)
	if errors.Is(err, sqlite.ErrDiskFull) || strings.Contains(err.Error(), "disk is full") {
		t.Errorf("Open of a directory on a file system with 16 MiB free answered %q (ErrDiskFull: %v): "+
			"the disk is not full; want the error that names the path (\"check that the path names a file\")",
			err, errors.Is(err, sqlite.ErrDiskFull))
	}
}
