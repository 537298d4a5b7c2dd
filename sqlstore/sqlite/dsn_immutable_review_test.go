package sqlite_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestURIImmutableIsRefusedByName: a "file:" URI with immutable=1 on a
// store already in WAL is refused at Open with "the journal mode is
// "delete" and cannot be switched to WAL (open the file read-write once)":
// the file is in WAL already, and opening it read-write changes nothing.
// The refusal should name immutable=1 (a handle that reads the file
// without its locks and its -wal) and say to remove it.
func TestURIImmutableIsRefusedByName(t *testing.T) {
	path := migratedFile(t)
	open(t, path, nil) // the store is in WAL, as every store served is
	_, err := sqlite.Open(ctxT(t), "file:"+path+"?immutable=1", nil)
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("Open with immutable=1 of a store in WAL: %v; want a refusal naming immutable=1", err)
	}
}
