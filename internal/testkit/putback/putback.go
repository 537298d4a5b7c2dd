// Package putback puts a copy of a SQLite file back under the processes
// that have it open, as a restore does, for the tests of what a running
// store does then (it refuses every operation until restarted: errors
// matching protocol.ErrRestartRequired). It works on files only: like the
// other test helpers it imports no database driver, so the caller makes
// and opens the file.
package putback

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// File puts backup back at path as a restore puts a file back: written
// beside it and renamed over it, and the old -wal and -shm removed (they
// belong to the file replaced; left in place, SQLite would lay them over
// the copy). Windows refuses to replace a file that is open: callers skip
// there.
func File(t testing.TB, path string, backup []byte) {
	t.Helper()
	if err := os.WriteFile(path+".restore", backup, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".restore", path); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(stale); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}
