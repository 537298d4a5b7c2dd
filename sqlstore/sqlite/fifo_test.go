//go:build unix

package sqlite_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Open and OpenDB refuse a path naming a named pipe (a mistyped path, a
// FIFO a script made), saying it is no regular file. SQLite answered
// "disk I/O error", which names neither what is wrong nor the fix.
func TestOpenRefusesANamedPipe(t *testing.T) {
	ctx := ctxT(t)
	pipe := filepath.Join(t.TempDir(), "leases.db")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.Open(ctx, pipe, nil)
	if err == nil {
		_ = b.Close(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open of a named pipe: %v; want an error saying it is not a regular file", err)
	}
	db, err := sqlite.OpenDB(pipe)
	if err == nil {
		_ = db.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("OpenDB of a named pipe: %v; want an error saying it is not a regular file", err)
	}
}
