//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rev73: a user who may read a SQLite store but not write its directory
// follows the audit trail (audit --follow). When no writer had the file
// open at that moment (no -wal file), leasectl opened it immutable=1,
// "sound for as long as nobody writes meanwhile": a follower is meant to
// run while others write, and it then never sees a new record (nor would
// watch), silently, although a one-shot `leasectl audit` by the same
// user reads them.
func TestReadOnlyFollowerSeesLaterWrites(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leasectl as another user (nobody)")
	}
	dir := t.TempDir()
	owner := leasectl{dir: dir}
	if r := owner.run(t, "acquire", "first", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire\n%s", r)
	}
	openUp(t, dir) // 0755: nobody reads the directory and the 0644 file, writes neither
	if _, err := os.Stat(filepath.Join(dir, "leasestore.db-wal")); err == nil {
		t.Fatal("a -wal file is left after the writer exited")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := owner.command(ctx, "audit", "--follow", "--since", "1h", "--interval", "50ms", "-o", "json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	lines := startLines(t, cmd)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case line := <-lines:
		if !strings.Contains(line, `"key":"first"`) {
			t.Fatalf("first follow line %q lacks key first", line)
		}
	case <-ctx.Done():
		t.Fatalf("no follow line for first; stderr: %s", cmd.Stderr)
	}

	// The owner (a service, another operator) writes on.
	if r := owner.run(t, "acquire", "second", "--owner", "w"); r.code != 0 {
		t.Fatalf("acquire second\n%s", r)
	}
	if r := asOtherUser(t, dir, "audit", "--key", "second"); r.code != 0 || !strings.Contains(r.stdout, "second") {
		t.Fatalf("a one-shot audit by the same user does not show the new record\n%s", r)
	}
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case line := <-lines:
		if !strings.Contains(line, `"key":"second"`) {
			t.Fatalf("follow line %q lacks key second", line)
		}
	case <-timer.C:
		t.Fatalf("audit --follow by a user who cannot write the store's directory printed nothing in 5s after another "+
			"process's acquire committed (the one-shot audit shows it); stderr: %s", cmd.Stderr)
	}
}
