package sqlite_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestOpenInAMissingDirectoryIsInvalid: a path whose directory does not
// exist (or is a file) names a store that cannot be, and no retry helps:
// Open and OpenDB answer invalid, naming the directory, and make nothing.
// They answered unavailable, as for an outage, while leasectl said
// invalid (exit 2) for the same path.
func TestOpenInAMissingDirectoryIsInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, dir, says string }{
		{missing, missing, "does not exist"},
		{file, file, "is not a directory"},
	} {
		plain := filepath.Join(tc.in, "x.db")
		uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(plain), OmitHost: true}).String()
		for _, path := range []string{plain, uri} {
			check := func(call string, err error) {
				t.Helper()
				if protocol.StatusOf(err) != protocol.StatusInvalid || !strings.Contains(err.Error(), tc.dir+" "+tc.says) {
					t.Errorf("%s(%q): %v (status %s); want status invalid saying %s %s", call, path, err, protocol.StatusOf(err), tc.dir, tc.says)
				}
			}
			b, err := sqlite.Open(ctxT(t), path, nil)
			if err == nil {
				_ = b.Close(ctxT(t))
			}
			check("Open", err)
			db, err := sqlite.OpenDB(path)
			if err == nil {
				_ = db.Close()
			}
			check("OpenDB", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Errorf("a refused open made the missing directory: %v", err)
	}
}
