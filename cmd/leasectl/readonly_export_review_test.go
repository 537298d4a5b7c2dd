//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// storeNobodyReads makes a store (leasestore.db in a directory of its
// own, the leasectl that owns it returned) of an acquire and n more audit
// records, which nobody (uid 65534) may read but whose directory and file
// it may not write, with no -wal file left: nobody's leasectl reads it
// immutable=1. It skips the test unless it runs as root.
func storeNobodyReads(t *testing.T, n string) (leasectl, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leasectl as another user (nobody)")
	}
	dir := t.TempDir()
	owner := leasectl{dir: dir}
	if r := owner.run(t, "acquire", "first", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire\n%s", r)
	}
	path := filepath.Join(dir, "leasestore.db")
	if out, err := exec.Command(fillAudit, path, "default", n).CombinedOutput(); err != nil {
		t.Fatalf("fillaudit: %v\n%s", err, out)
	}
	openUp(t, dir) // 0755: nobody reads the directory and the 0644 file, writes neither
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("a -wal file is left after the writers exited")
	}
	return owner, path
}

// pausedExport makes a store of n audit records that nobody (uid 65534)
// may read but whose directory it cannot write, starts `audit export -A`
// as nobody with no -wal file (so read immutable=1), reads its first line
// and then stops reading: the export blocks printing its first page (the
// pipe is full), after reading and checking it. meanwhile runs then; the
// rest is read and the export's run returned with every line printed.
func pausedExport(t *testing.T, n string, meanwhile func(path string)) (run, []string) {
	t.Helper()
	owner, path := storeNobodyReads(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"audit", "export", "-A"}
	export := asNobody(owner.command(ctx, args...))
	export.Stdout = nil
	out, err := export.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := export.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(out, 1<<20)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("export printed no line: %v; stderr: %s", err, export.Stderr)
	}
	time.Sleep(500 * time.Millisecond) // the export fills the pipe and blocks within its first page
	meanwhile(path)
	lines := []string{strings.TrimSuffix(first, "\n")}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	r := run{args: args}
	var exitErr *exec.ExitError
	if err := export.Wait(); errors.As(err, &exitErr) {
		r.code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.stderr = export.Stderr.(*bytes.Buffer).String()
	return r, lines
}

// ids returns the ids of the JSON lines, failing on a line that is none.
func ids(t *testing.T, lines []string, r run) []int64 {
	t.Helper()
	var out []int64
	for i, line := range lines {
		var rec struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is no record: %v: %s\n%s", i+1, err, line, r)
		}
		out = append(out, rec.ID)
	}
	return out
}

// An operator prunes the trail and VACUUMs the store (it shrinks) while a
// user who cannot write its directory exports it, read without locks. The
// export's next page is read through a page cache that never goes stale
// from a file now much shorter: SQLite fails the read ("database disk
// image is malformed"), and export returns that error without making its
// check, so the user is told the store is corrupt, not that it changed
// while read without locks and what to do.
func TestReadOnlyExportShrunkUnderItSaysChanged(t *testing.T) {
	t.Parallel()
	r, lines := pausedExport(t, "5000", func(path string) {
		if r := (leasectl{dir: filepath.Dir(path)}).run(t, "audit", "prune", "--before", "0s", "--yes"); r.code != 0 {
			t.Fatalf("prune\n%s", r)
		}
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`VACUUM`); err != nil {
			t.Fatal(err)
		}
	})
	got := ids(t, lines, r)
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("line %d is record %d (each record once, in order)\n%s", i+1, id, r)
		}
	}
	if r.code != 5 || !strings.Contains(r.stderr, "changed while") || strings.Contains(r.stderr, "malformed") {
		t.Fatalf("export of a file pruned and vacuumed under it, read without locks: exit %d, want 5 saying "+
			"the file changed while read without locks (not that it is malformed)\n%s", r.code, r)
	}
}

// A process that may write the store's directory only reads the store
// (here a plain read-only query, as a monitoring script or the sqlite3
// shell makes) while a user who cannot write the directory exports it.
// Nothing is written: the file keeps its inode, size and mtime, and
// everything the export reads comes from it. Its open makes a -wal file,
// and export stops (exit 5) saying the store "changed while it was being
// read".
func TestReadOnlyExportBesideAReaderIsNotStopped(t *testing.T) {
	t.Parallel()
	var file string
	var before os.FileInfo
	closed := make(chan struct{})
	r, lines := pausedExport(t, "5000", func(path string) {
		var err error
		file = path
		if before, err = os.Stat(path); err != nil {
			t.Fatal(err)
		}
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM leasestore_audit`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The reader is done a moment later, while the export goes on.
		time.AfterFunc(time.Second, func() { _ = db.Close(); close(closed) })
	})
	<-closed
	after, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()) {
		t.Fatalf("the reader changed the file: %v %d -> %v %d", before.ModTime(), before.Size(), after.ModTime(), after.Size())
	}
	got := ids(t, lines, r)
	if r.code != 0 || len(got) != 5001 {
		t.Fatalf("export beside a process that only read the store (the file kept its inode, size and mtime): "+
			"exit %d after %d records, want exit 0 and all 5001\n%s", r.code, len(got), r)
	}
}
