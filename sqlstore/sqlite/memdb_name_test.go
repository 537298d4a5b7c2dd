package sqlite_test

import (
	"os"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// OpenDB refuses SQLite's memdb VFS ("file:/NAME?vfs=memdb"), an
// in-memory database shared by the connections of one process, as it
// refuses ":memory:" and mode=memory (TestOpenDBRefusesAnInMemoryName):
// saying the backend needs a file and naming memstore for tests.
func TestOpenDBRefusesTheMemdbVFS(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{"file:/leases.db?vfs=memdb", "file:leases.db?vfs=memdb"} {
		db, err := sqlite.OpenDB(name)
		if err == nil {
			_ = db.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "in-memory") || !strings.Contains(err.Error(), "memstore") {
			t.Errorf("OpenDB(%q): %v; want it refused as an in-memory database, naming a file and memstore", name, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) > 0 {
		t.Errorf("OpenDB of in-memory names left files behind: %v", entries)
	}
}
