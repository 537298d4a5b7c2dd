package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// A -wal or -shm path that is no regular file (a directory someone made,
// a restore that unpacked one) is refused by OpenDB naming it and what it
// is, and no database file is created beside it. SQLite answered "disk
// I/O error" for a -wal directory, and "read-only" for a -shm one, and
// left an empty database file behind.
func TestOpenDBRefusesACompanionThatIsNoFile(t *testing.T) {
	for _, suffix := range []string{"-wal", "-shm"} {
		path := filepath.Join(t.TempDir(), "leases.db")
		if err := os.Mkdir(path+suffix, 0o755); err != nil {
			t.Fatal(err)
		}
		db, err := sqlite.OpenDB(path)
		if err == nil {
			_ = db.Close()
		}
		if err == nil || !strings.Contains(err.Error(), path+suffix) || !strings.Contains(err.Error(), "not a regular file but a directory") {
			t.Errorf("OpenDB beside a directory %s: %v; want it refused naming %s as not a regular file but a directory", suffix, err, path+suffix)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("OpenDB beside a directory %s created the database file; want nothing created", suffix)
		}
	}
}
