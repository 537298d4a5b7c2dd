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

// asOtherUser runs leasectl with args in dir as a user other than the
// file's owner: nobody when the tests run as root (TestMain leaves the
// binary runnable by any user), else this user (the caller then takes
// permissions away with chmod, which binds a non-root owner too).
func asOtherUser(t *testing.T, dir string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := leasectl{dir: dir}
	cmd := c.command(ctx, args...)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	return finish(t, cmd, args, cmd.Run())
}

// openUp lets any user into dir and its parent (t.TempDir makes them 0700).
func openUp(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A SQLite store the user may read but not write answers reads (opened
// read-only) and refuses changes saying why; health refuses it too, as
// every write on it would fail (it answered healthy); a file the user
// cannot read says permission denied.
func TestReadOnlySQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	owner := leasectl{dir: dir}
	if r := owner.run(t, "acquire", "k", "--owner", "w1"); r.code != 0 {
		t.Fatalf("acquire\n%s", r)
	}
	file := filepath.Join(dir, "leasestore.db")
	fileMode, dirMode := os.FileMode(0o644), os.FileMode(0o755)
	if os.Geteuid() != 0 {
		fileMode, dirMode = 0o444, 0o555
	}
	openUp(t, dir)
	if err := os.Chmod(file, fileMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })

	for _, args := range [][]string{{"get", "k"}, {"list"}, {"audit"}} {
		if r := asOtherUser(t, dir, args...); r.code != 0 {
			t.Errorf("%v on a read-only store: exit %d, want 0\n%s", args, r.code, r)
		}
	}
	if r := asOtherUser(t, dir, "health"); r.code != 5 || !strings.Contains(r.stderr, "read-only") || !strings.Contains(r.stderr, "writable") {
		t.Errorf("health on a read-only store: want exit 5 saying it is read-only and must be writable\n%s", r)
	}
	r := asOtherUser(t, dir, "acquire", "k2", "--owner", "w2")
	if r.code != 5 || !strings.Contains(r.stderr, "read-only") || !strings.Contains(r.stderr, "write access") {
		t.Errorf("acquire on a read-only store: want exit 5 saying it needs write access\n%s", r)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("reading a read-only store left files behind: %v", entries)
	}

	if err := os.Chmod(file, 0o600&fileMode); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(file, 0); err != nil {
			t.Fatal(err)
		}
	}
	r = asOtherUser(t, dir, "get", "k")
	if r.code != 5 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("get on an unreadable store: want exit 5 saying permission denied\n%s", r)
	}
}
