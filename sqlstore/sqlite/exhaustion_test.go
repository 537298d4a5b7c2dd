//go:build linux

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/fullfs"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Opening a migrated store whose file system is full (a real tmpfs:
// ENOSPC, here when SQLite creates the file's -shm) must say the disk is
// full, as a write on a full disk does ("the disk is full"), so the
// operator frees space. Before a fix it answers
// `sqlite database ".../leases.db": disk I/O error: disk I/O error (4874)`
// (SQLITE_IOERR_SHMSIZE), naming neither the full disk nor the fix, and
// leasectl prints the same for every command (exit 5).
func TestOpenOnAFullDiskSaysTheDiskIsFull(t *testing.T) {
	t.Parallel()
	dir := fullfs.Mount(t, 1<<20)
	path := migratedFileIn(t, dir)
	filler := fullfs.Fill(t, dir, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := sqlite.Open(ctx, path, nil)
	if err == nil {
		_ = b.Close(context.Background())
		t.Fatal("Open on a full file system succeeded; the test did not fill it")
	}
	t.Logf("Open on a full file system: %v", err)
	if st := protocol.StatusOf(err); st != protocol.StatusUnavailable {
		t.Errorf("status %q, want unavailable", st)
	}
	if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "disk is full") && !strings.Contains(msg, "no space") {
		t.Errorf("Open on a full file system answered %q: it does not say the disk is full", err)
	}
	// Once there is room again, the store opens and serves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("Open once the file system has room: %v", err)
	}
	defer b.Close(context.Background())
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "after"})
	wantStatus(t, "acquire once the file system has room", res, err, protocol.StatusAcquired)
}

// noFileWorkerMode makes the test binary a process that opens a store,
// holds its writer's connection, lowers its limit of open files
// (RLIMIT_NOFILE, process-wide, hence a process of its own) to the
// descriptors it has open, and then reads, which needs a connection of its
// own: it prints the read's error on stdout. See TestTooManyOpenFilesIsNamed.
const noFileWorkerMode = "nofile"

func runNoFileWorker() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "nofile worker: "+format+"\n", args...)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := sqlite.Open(ctx, os.Getenv(workerFileEnv), nil)
	if err != nil {
		return fail("open: %v", err)
	}
	defer b.Close(context.Background())
	release := sqlite.HoldWriter(b) // the one connection open: the read needs another
	defer release()
	probe, err := os.Open(os.DevNull)
	if err != nil {
		return fail("%v", err)
	}
	lowest := probe.Fd() // the lowest descriptor free
	_ = probe.Close()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("getrlimit: %v", err)
	}
	capped := lim
	capped.Cur = uint64(lowest)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &capped); err != nil {
		return fail("setrlimit: %v", err)
	}
	_, gerr := b.Get(ctx, protocol.GetRequest{Key: key("k"), RequestID: "get"})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("setrlimit: %v", err)
	}
	if gerr == nil {
		return fail("the get needed no new descriptor")
	}
	fmt.Printf("%s\n%s\n", protocol.StatusOf(gerr), gerr)
	return 0
}

// A store that cannot open a connection because the process is at its
// limit of open files (EMFILE: `leasectl serve` under a low `ulimit -n`
// with many clients, seen as SQLITE_CANTOPEN) must say so, naming the
// limit, and must not send the operator after the path and its
// permissions. Before a fix the read answers
// `sqlite database ".../leases.db" cannot be opened: check that the path
// names a file in an existing, writable directory: unable to open database
// file (14)`, a fix that does not apply: the path is fine and the store
// serves again once descriptors are free.
func TestTooManyOpenFilesIsNamed(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	out := workerOutput(t, noFileWorkerMode, path)
	status, msg, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	t.Logf("a read at the limit of open files: %s: %s", status, msg)
	if status != string(protocol.StatusUnavailable) {
		t.Errorf("status %q, want unavailable", status)
	}
	if strings.Contains(msg, "check that the path names a file") {
		t.Errorf("the error sends the operator after the path (%q), but the process is at its limit of open files", msg)
	}
	if !strings.Contains(msg, "open files") && !strings.Contains(msg, "descriptor") {
		t.Errorf("the error %q does not name the limit of open files (ulimit -n, LimitNOFILE)", msg)
	}
}

// migratedFileIn copies a migrated store into dir and returns its path.
func migratedFileIn(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(migratedFile(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "leases.db")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A store whose file system filled while it was open cannot write: every
// change answers unavailable ("the disk is full"). Health, which a served
// store's readiness probe (/readyz) asks, must say so too, so that a load
// balancer stops sending writes to it; its write probe commits no page,
// and answered healthy. Once there is room again, Health is healthy.
func TestHealthOfAStoreWhoseDiskFilledSaysTheDiskIsFull(t *testing.T) {
	t.Parallel()
	dir := fullfs.Mount(t, 4<<20)
	path := migratedFileIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if err := b.Health(ctx); err != nil {
		t.Fatalf("Health with room: %v", err)
	}
	filler := fullfs.Fill(t, dir, 0)
	res, aerr := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "full"})
	if aerr == nil {
		t.Fatalf("acquire on a full file system answered %s; the test did not fill it", res.Status)
	}
	err = b.Health(ctx)
	if err == nil {
		t.Fatalf("Health of a store whose file system is full (an acquire just failed: %v) answered healthy", aerr)
	}
	if st := protocol.StatusOf(err); st != protocol.StatusUnavailable || !errors.Is(err, sqlite.ErrDiskFull) {
		t.Errorf("Health on a full file system: status %q, %v; want unavailable matching ErrDiskFull", st, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err != nil {
		t.Fatalf("Health once the file system has room: %v", err)
	}
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "room"})
	wantStatus(t, "acquire once the file system has room", res, err, protocol.StatusAcquired)
}
