//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Removing a store's -wal and -shm while a process has it open (taken for
// stale lock files) is refused by that process from then on; it must not
// also undo what other processes committed since. Here `run` holds the
// file open while the files are removed, another process acquires a key
// and exits, then `run`'s command ends: its release is refused (exit 5),
// and the other process's acquire stays in the store. When `run` closed,
// SQLite checkpointed its orphaned write-ahead log over the file and the
// acknowledged acquire was gone: get answered not_found.
func TestRemovedWALDoesNotUndoOtherProcessesCommits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:leases.db"}
	if r := c.run(t, "acquire", "a", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire a\n%s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := c.command(ctx, "run", "b", "--owner", "w", "--ttl", "1m", "--",
		"sh", "-c", "touch started; while [ ! -e finish ]; do sleep 0.05; done")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("run's command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, f := range []string{"leases.db-wal", "leases.db-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	acq := c.run(t, "acquire", "c", "--owner", "w2", "-o", "token")
	if acq.code != 0 {
		t.Fatalf("acquire c after the -wal and -shm were removed\n%s", acq)
	}
	if err := os.WriteFile(filepath.Join(dir, "finish"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := finish(t, holder, []string{"run", "b"}, holder.Wait())
	if r.code != 5 || !strings.Contains(r.stderr, "-shm") {
		t.Errorf("run whose -shm was removed under it: want exit 5 naming the -shm\n%s", r)
	}
	if got := c.run(t, "get", "c", "-o", "token"); got.code != 0 || got.stdout != acq.stdout {
		t.Errorf("get c, acquired (token %s) by another process after the -wal and -shm were removed, once run closed: "+
			"want it found with that token, not undone by run's stale write-ahead log\n%s", strings.TrimSpace(acq.stdout), got)
	}
}
