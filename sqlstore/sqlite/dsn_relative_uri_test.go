package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestOpenRelativeFileURIWithEscapes opens a migrated file whose name
// holds a space through a relative "file:" URI, which escapes it as URIs
// do ("file:a%20b.db"; SQLite decodes %HH in a URI's path). Open's doc:
// path is a file name or a "file:" URI, as for OpenDB; it refuses only a
// missing file. The absolute URI and the plain name open this file; the
// relative URI was refused as a missing store ("no leasestore store at
// a%20b.db"), Open having looked for the file under its escaped name.
// Not parallel: it changes the working directory.
func TestOpenRelativeFileURIWithEscapes(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a b.db"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, path := range []string{"a b.db", "file:" + filepath.ToSlash(filepath.Join(dir, "a%20b.db")), "file:a%20b.db"} {
		b, err := sqlite.Open(ctxT(t), path, nil)
		if err != nil {
			t.Fatalf("Open(%q) of the migrated file %q: %v", path, filepath.Join(dir, "a b.db"), err)
		}
		_ = b.Close(context.Background())
	}
}
