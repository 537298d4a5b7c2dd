package sqlite_test

import (
	"os"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// OpenDB refuses SQLite's names of an in-memory database, saying that the
// backend needs a file and naming memstore for tests, and creates no
// file. A plain ":memory:" was taken for a file name and made a file
// called ":memory:" in the working directory, which the next run found
// again with its leases; "file::memory:" and mode=memory were refused
// naming a fix for a file ("open the file read-write once"), as was the
// memdb VFS ("file:/NAME?vfs=memdb", shared by one process's connections).
func TestOpenDBRefusesAnInMemoryName(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{":memory:", "file::memory:", "file:leases.db?mode=memory",
		"file:/leases.db?vfs=memdb", "file:leases.db?vfs=memdb"} {
		db, err := sqlite.OpenDB(name)
		if err == nil {
			_ = db.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "in-memory") || !strings.Contains(err.Error(), "memstore") ||
			strings.Contains(err.Error(), "read-write once") {
			t.Errorf("OpenDB(%q): %v; want it refused as an in-memory database, naming a file and memstore", name, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) > 0 {
		t.Errorf("OpenDB of in-memory names left files behind: %v", entries)
	}
}
