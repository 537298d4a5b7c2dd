//go:build linux

// Package fullfs gives tests a real file system that runs out of space: a
// small tmpfs mounted on a temporary directory (as root), and a way to fill
// it. It imports no leasestore package.
package fullfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a directory of t's and returns it;
// it is unmounted when the test ends. The test is skipped, saying so, when
// the mount is refused (it needs root).
func Mount(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs (needs root) to fill a file system: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system has no more than room
// bytes left (0: none, ENOSPC), and returns the file's path: removing it
// gives the space back.
func Fill(t *testing.T, dir string, room int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if free := int64(st.Bavail) * int64(st.Bsize); room > 0 {
		if _, err := f.Write(make([]byte, max(free-room, 0))); err != nil {
			t.Fatalf("filling %s: %v", dir, err)
		}
		return path
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	for { // what is left, byte by byte
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	return path
}
