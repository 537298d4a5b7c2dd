//go:build !linux

package sqlite

// openProbe is Linux only: elsewhere the cause of a failed open is not
// looked for.
func openProbe() error { return nil }

// openFilesLimit is Linux only.
func openFilesLimit() (uint64, bool) { return 0, false }

// fileSystemRoom is Linux only: elsewhere the room left is not known.
func fileSystemRoom(string) (room int64, inodes uint64, ok bool) { return 0, 0, false }
