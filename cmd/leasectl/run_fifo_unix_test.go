//go:build unix

package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A CMD run cannot start takes no lease, and run tells before the acquire
// (the operator guide, run). An executable named pipe passes exec's look
// up (executable, no directory), but the kernel executes regular files
// only (permission denied, 126). run opens it to read its #! line, and
// that open waits for a writer that never comes: run hangs before the
// acquire, and, in a system call, does not even heed SIGTERM. The hang
// is cut here after 30s (the command's context kills it).
func TestRunOfANamedPipeIsRefusedWithoutHanging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	fifo := filepath.Join(dir, "job")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"run", "fifo", "--", fifo}
	cmd := c.command(ctx, args...)
	r := finish(t, cmd, args, cmd.Run())
	if ctx.Err() != nil || r.code != 126 {
		t.Fatalf("run of an executable named pipe: exit %d (context: %v), want 126 (the kernel executes regular files only) without waiting for a writer\n%s", r.code, ctx.Err(), r)
	}
	if recs := c.runJSON(t, 0, "audit", "--key", "fifo")["records"].([]any); len(recs) != 0 {
		t.Errorf("run of an executable named pipe left %d records in the trail of its key, want none (it takes no lease): %v", len(recs), recs)
	}
}
