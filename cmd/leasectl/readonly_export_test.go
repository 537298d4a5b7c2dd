//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A user who may read a SQLite store but not write its directory exports
// the audit trail when no process has the store open (no -wal file):
// leasectl read the file immutable=1, without locks and with a page cache
// that never goes stale, "sound for as long as nobody writes meanwhile".
// Another process then writes while the export runs, its commits
// checkpointed into the very file being read: the export ended with exit 0
// and "audit export: done", or repeated records (ids 97641-98000 printed
// again after 98000, exit 0), or skipped 111 records and failed with
// "database disk image is malformed". An export must not vouch for what it
// read from a file changed under it: it stops (exit 5) before printing
// anything read after the change, says what to do and where to resume, and
// what it printed is the trail's start, each record once, in order.
func TestReadOnlyExportBesideWriter(t *testing.T) {
	t.Parallel()
	const n = 100000
	owner, path := storeNobodyReads(t, strconv.Itoa(n))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	export := asNobody(owner.command(ctx, "audit", "export", "-A"))
	lines := startLines(t, export)
	var got []string
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("export printed nothing; stderr: %s", export.Stderr)
		}
		got = append(got, line)
	case <-ctx.Done():
		t.Fatal("export printed nothing in 2m")
	}

	// The export is under way: another process writes, in batches, each
	// its own process (checkpointed into the file when it exits).
	written := make(chan error, 1)
	go func() {
		for range 10 {
			if out, err := exec.Command(fillAudit, path, "default", "3000").CombinedOutput(); err != nil {
				written <- fmt.Errorf("%w: %s", err, out)
				return
			}
		}
		written <- nil
	}()
	for line := range lines {
		got = append(got, line)
	}
	r := run{args: []string{"audit", "export", "-A"}}
	var exitErr *exec.ExitError
	if err := export.Wait(); errors.As(err, &exitErr) {
		r.code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.stderr = export.Stderr.(*bytes.Buffer).String()
	if err := <-written; err != nil {
		t.Fatalf("the writer: %v", err)
	}

	// What was printed is the trail from its start: ids 1, 2, 3, ...
	last := int64(0)
	for i, line := range got {
		var rec struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is no record: %v: %s\n%s", i+1, err, line, r)
		}
		if rec.ID != last+1 {
			t.Fatalf("export by a user who cannot write the store's directory, beside a writer: line %d is record "+
				"%d after record %d (each record once, in order, is the trail)\n%s", i+1, rec.ID, last, r)
		}
		last = rec.ID
	}
	if r.code == 0 {
		t.Fatalf("export by a user who cannot write the store's directory, read without locks while another "+
			"process wrote the file: exit 0 (%d records), vouching for a read of a file changed under it, want "+
			"exit 5 naming what to do\n%s", len(got), r)
	}
	if r.code != 5 {
		t.Fatalf("export beside a writer: exit %d, want 5\n%s", r.code, r)
	}
	for _, want := range []string{"changed while", "while a writer has the store open",
		"write access to the file and its directory", "--dsn http://", "--cursor a1." + strconv.FormatInt(last, 10)} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("export stopped without saying %q\n%s", want, r)
		}
	}
	if last > n+1 {
		t.Errorf("export printed record %d, written after it began, read from a file changed under it\n%s", last, r)
	}
}
