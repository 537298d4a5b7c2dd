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

// daemon is the user id that owns the store in a shared directory: a
// user other than root (who may write any file) and nobody (the reader).
const daemon = 1

// sharedStore returns a directory that every user may write (0777, as a
// shared data directory), holding a store made by user daemon (its file
// 0644: nobody may read it, not write it) that no process has open.
func sharedStore(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leasectl as other users")
	}
	dir := t.TempDir()
	openUp(t, dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"acquire", "k", "--owner", "w1"}
	cmd := asUser(leasectl{dir: dir}.command(ctx, args...), daemon)
	if r := finish(t, cmd, args, cmd.Run()); r.code != 0 {
		t.Fatalf("the owner's acquire\n%s", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the owner's acquire left more than the store: %v", entries)
	}
	return dir
}

// A user who may read a store's file but not write it, in a directory it
// may write, reads the store while no process has it open. leasectl
// opened it mode=ro, and SQLite made the -wal and -shm files, owned by
// the reader, and left them behind (a read-only connection cannot
// checkpoint them away): the owner's next write failed (exit 5, "is
// read-only ... attempt to write a readonly database"), and so would the
// service that owns the store, until someone removed the reader's files.
// A read leaves no file behind, and the owner writes on.
func TestReadOnlyFileInSharedDirLeavesNoFiles(t *testing.T) {
	t.Parallel()
	dir := sharedStore(t)
	for _, args := range [][]string{{"get", "k"}, {"list", "-A"}, {"describe", "k"}, {"namespaces"}, {"audit"}} {
		if r := asOtherUser(t, dir, args...); r.code != 0 || !strings.Contains(r.stdout, "w1") && args[0] != "namespaces" {
			t.Errorf("%v by a user who may not write the file: want exit 0 and the lease\n%s", args, r)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("reads by a user who may not write the store's file, in a directory it may write, left files "+
			"behind: %v, want only leasestore.db", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"acquire", "k2", "--owner", "w1"}
	cmd := asUser(leasectl{dir: dir}.command(ctx, args...), daemon)
	if r := finish(t, cmd, args, cmd.Run()); r.code != 0 {
		t.Errorf("the owner's acquire after another user read the store\n%s", r)
	}
}

// Such a user's follower (audit --follow, watch) with no process holding
// the store open is refused at once, naming what to do, as in a directory
// it may not write: reading the store would make the -wal and -shm files
// as this user's, which would keep the owner from writing.
func TestReadOnlyFileInSharedDirFollowerIsRefused(t *testing.T) {
	t.Parallel()
	dir := sharedStore(t)
	args := []string{"audit", "--follow", "--since", "1h", "--interval", "50ms"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := asNobody(leasectl{dir: dir}.command(ctx, args...))
	r := finish(t, cmd, args, cmd.Run())
	if r.code != 5 {
		t.Fatalf("%v with no writer, by a user who may not write the store's file: exit %d, want a refusal "+
			"(exit 5) at once\n%s", args, r.code, r)
	}
	for _, want := range []string{"no later commit would show", "while a writer has the store open",
		"write access to the file and its directory", "--dsn http://"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%v refused without saying %q\n%s", args, want, r)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused follower left files behind: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "leasestore.db")); err != nil {
		t.Fatal(err)
	}
}
