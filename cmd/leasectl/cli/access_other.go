//go:build !unix

package cli

import "os"

// writable reports whether this user may write the file at path.
func writable(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// dirWritable reports whether this user may create files in dir. Outside
// Unix it is not checked: SQLite's own error tells.
func dirWritable(string) bool { return true }
