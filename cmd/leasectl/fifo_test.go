//go:build unix

package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A --dsn sqlite:PATH naming a named pipe (a mistyped path, a FIFO a
// script made) is refused at once, saying it is no regular file, as a
// directory is. leasectl blocked forever opening it for reading (no
// writer ever comes), past --timeout, and Ctrl-C and SIGTERM did not end
// it either: only SIGKILL did. The context below kills the process if it
// hangs, so the test fails rather than waits.
func TestSQLiteDSNNamingAPipeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipe := filepath.Join(dir, "leases.db")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	c := leasectl{dir: dir, dsn: "sqlite:" + pipe}
	for _, args := range [][]string{{"acquire", "k", "--owner", "w", "--timeout", "1s"}, {"get", "k", "--timeout", "1s"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := c.command(ctx, args...)
		r := finish(t, cmd, args, cmd.Run())
		hung := ctx.Err() != nil
		cancel()
		if hung || r.code != 5 || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("%v on a named pipe: exit %d (killed by the test's deadline: %v), want 5 saying it is not a regular file\n%s",
				args, r.code, hung, r)
		}
	}
}
