//go:build unix

package cli

import "syscall"

// writable reports whether this user may write the file at path.
func writable(path string) bool { return syscall.Access(path, 2 /* W_OK */) == nil }

// dirWritable reports whether this user may create files in dir (SQLite's
// -wal and -shm files).
func dirWritable(dir string) bool { return syscall.Access(dir, 2|1 /* W_OK|X_OK */) == nil }
