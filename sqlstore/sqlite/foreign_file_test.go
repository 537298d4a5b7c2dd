package sqlite_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/appdb"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Open refuses a file without leasestore's schema, and writes nothing to
// it: a database of another application (a --dsn or path pointing at the
// wrong file) or an empty file is left byte for byte as it was. Open
// switched the file to WAL before it read the schema, so the refused file
// came back with its header changed (and so readable only by SQLite 3.7
// or newer, and in WAL mode for the application that owns it).
func TestOpenWritesNothingToAFileWithoutTheSchema(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{filepath.Join(dir, "app.db"): appdb.Write(t, filepath.Join(dir, "app.db")), empty: {}}
	for path, before := range files {
		b, err := sqlite.Open(ctx, path, nil)
		if err == nil {
			_ = b.Close(ctx)
			t.Fatalf("Open of %s, which has no leasestore schema: no error", filepath.Base(path))
		}
		if protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), "leasectl migrate up") {
			t.Errorf("Open of %s: %v (%s); want unavailable naming `leasectl migrate up`", filepath.Base(path), err, protocol.StatusOf(err))
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("Open of %s refused it but changed it: %d bytes before, %d after, first difference at byte %d; want it untouched",
				filepath.Base(path), len(before), len(after), firstDifference(before, after))
		}
	}
}

// firstDifference returns the offset of the first byte where a and b
// differ (the shorter one's length when one is a prefix of the other).
func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
