package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func TestOpenDirectoryUnavailable(t *testing.T) {
	dir := t.TempDir()
	_, err := sqlite.OpenDB(dir)
	expectUnavailable(t, "OpenDB on a directory", err, dir, "is not a regular file but a directory")
	_, err = sqlite.Open(ctxT(t), dir, nil)
	expectUnavailable(t, "Open on a directory", err, dir, "is not a regular file but a directory")
	// A missing directory is invalid input: TestOpenInAMissingDirectoryIsInvalid.
}

func TestOpenCorruptFileUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.db")
	garbage := []byte(strings.Repeat("this is not an sqlite database, only garbage bytes. ", 200))
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.OpenDB(path)
	expectUnavailable(t, "OpenDB on garbage", err, path, "not a database or is corrupt")
	_, err = sqlite.Open(ctxT(t), path, nil)
	expectUnavailable(t, "Open on garbage", err, path, "not a database or is corrupt")
}

// A database page overwritten with garbage after the backend opened the
// file: reads and writes that touch it answer unavailable naming the file.
func TestCorruptPageUnavailable(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	b := open(t, path, nil)
	rt := protocol.New(b, nil)
	for i := range 50 {
		name := strings.Repeat("k", 200) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// Move everything from the WAL into the file, then scribble over every
	// page but the first (the header), as a failing disk would.
	db := rawDB(t, path)
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var pageSize, pages int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", int(pageSize)/4))
	for p := int64(1); p < pages; p++ {
		if _, err := f.WriteAt(junk, p*pageSize); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = b.List(ctx, protocol.ListRequest{Namespace: "ns", RequestID: "l"})
	expectUnavailable(t, "list over corrupt pages", err, path, "corrupt")
	_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("new"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	expectUnavailable(t, "acquire over corrupt pages", err, path, "corrupt")
}

// A file opened read-only (SQLite's mode=ro) reads but refuses writes: a
// state change answers unavailable naming the file. Tests run as root, for
// whom file permissions do not stop writes, so read-only is requested
// through the URI instead.
func TestReadOnlyFileUnavailable(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	rw := open(t, path, nil)
	if _, err := rw.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Hour, RequestID: "a"}); err != nil {
		t.Fatal(err)
	}
	ro := open(t, "file:"+path+"?mode=ro", nil)
	if res, err := ro.Get(ctx, protocol.GetRequest{Key: key("held"), RequestID: "g"}); err != nil || res.Status != protocol.StatusFound {
		t.Fatalf("get on the read-only handle: %+v, %v; want found", res, err)
	}
	_, err := ro.Acquire(ctx, protocol.AcquireRequest{Key: key("other"), Owner: "w", TTL: time.Hour, RequestID: "b"})
	expectUnavailable(t, "acquire on a read-only file", err, path, "read-only", "mode=ro", "writable")
	_, err = ro.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "w", Token: 1, RequestID: "c"})
	expectUnavailable(t, "release on a read-only file", err, path, "read-only")
	if res, err := rw.Get(ctx, protocol.GetRequest{Key: key("other"), RequestID: "g2"}); err != nil || res.Status != protocol.StatusNotFound {
		t.Fatalf("get after the refused acquire: %+v, %v; want not_found", res, err)
	}
}

// TestHealthRefusesAHandleThatCannotWrite: Health answered healthy on a
// handle where every write fails, while acquire answered unavailable (and
// PostgreSQL's Health refuses read-only connections). It answers
// unavailable, naming the reason and the fix. Tests run as root, for whom
// file permissions do not stop writes, so a file this process may not
// write is tested only when not root; SQLite refuses such a file with the
// same SQLITE_READONLY as mode=ro.
func TestHealthRefusesAHandleThatCannotWrite(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		uri   func(t *testing.T, path string) string
		parts []string
	}{
		"mode=ro":    {func(_ *testing.T, p string) string { return "file:" + p + "?mode=ro" }, []string{"read-only", "mode=ro", "writable"}},
		"query_only": {func(_ *testing.T, p string) string { return "file:" + p + "?_pragma=query_only(1)" }, []string{"read-only", "query_only", "writable"}},
		"file mode 0444": {func(t *testing.T, p string) string {
			if os.Geteuid() == 0 {
				t.Skip("running as root, whom file permissions do not stop from writing")
			}
			if err := os.Chmod(p, 0o444); err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"read-only", "writable"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := migratedFile(t)
			b := open(t, c.uri(t, path), nil)
			_, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
			expectUnavailable(t, "acquire", err, "read-only")
			expectUnavailable(t, "Health", b.Health(ctxT(t)), append([]string{path}, c.parts...)...)
		})
	}
}

// TestHealthDoesNotWaitForAWriter: Health's check that the handle can
// write neither waits for the write lock nor takes it from a writer: with
// another connection holding the lock longer than Health's deadline,
// Health answers healthy, and the handle's writes still wait out their
// busy timeout afterwards (the check leaves it as it found it).
func TestHealthDoesNotWaitForAWriter(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	release := holdWriteLock(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Health(ctx); err != nil {
		t.Fatalf("Health while another connection holds the write lock: %v; want healthy, at once", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire waits in the busy handler
	release()
	if err := <-done; err != nil {
		t.Fatalf("acquire that waited for the lock: %v; want it to wait out the busy timeout and succeed", err)
	}
}

// holdWriteLock takes the file's write lock on a connection of its own and
// returns a function that releases it.
func holdWriteLock(t *testing.T, path string) func() {
	t.Helper()
	db := rawDB(t, path)
	conn, err := db.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctxT(t), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
			t.Errorf("rollback: %v", err)
		}
		_ = conn.Close()
	}
	t.Cleanup(release)
	return release
}

func expectTimeout(t *testing.T, what string, err error) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != protocol.StatusTimeout || !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("%s: err = %v, want an *protocol.Error with status timeout", what, err)
	}
}

// Another connection holds the write lock past the operation's deadline:
// the state change answers timeout, having written nothing, and succeeds
// once the lock is gone.
func TestWriteBlockedPastDeadlineTimesOut(t *testing.T) {
	path := migratedFile(t)
	b := open(t, path, nil) // busy timeout 5s: the context's deadline ends the wait first
	release := holdWriteLock(t, path)

	req := protocol.AcquireRequest{Key: key("job"), Owner: "w", TTL: time.Minute, RequestID: "blocked"}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Acquire(ctx, req)
	expectTimeout(t, "acquire under another writer's lock", err)
	// The wait ended with the deadline, not the 5s busy timeout. The bound is
	// loose because the machine is shared.
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("acquire took %v to time out, want about the 150ms deadline", d)
	}

	// Through the runtime, the status is timeout as well.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	res, err := protocol.New(b, nil).Release(ctx2, protocol.ReleaseRequest{Key: key("job"), Owner: "w", Token: 1})
	if res.Status != protocol.StatusTimeout || !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("runtime release under the lock: %+v, %v; want timeout", res, err)
	}

	// Reads do not wait for the writer (WAL).
	if res, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("job"), RequestID: "g"}); err != nil || res.Status != protocol.StatusNotFound {
		t.Fatalf("get while the lock is held: %+v, %v; want not_found", res, err)
	}

	release()
	res, err = b.Acquire(ctxT(t), req)
	if err != nil || res.Status != protocol.StatusAcquired || res.Replayed {
		t.Fatalf("acquire after the lock is gone: %+v, %v; want a fresh acquired (the timed-out one wrote nothing)", res, err)
	}
	if n := auditLen(t, b); n != 1 {
		t.Fatalf("audit has %d records, want 1", n)
	}
}

// With a busy timeout shorter than the deadline, SQLite gives up first with
// SQLITE_BUSY, which is reported as timeout too: the caller cannot know
// whether the change happened, and retries with the same request id.
func TestBusyTimeoutBeforeDeadlineTimesOut(t *testing.T) {
	path := migratedFile(t)
	b, err := sqlite.Open(ctxT(t), path, &sqlite.Config{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	holdWriteLock(t, path)
	_, err = b.Revoke(ctxT(t), protocol.RevokeRequest{Key: key("job"), Actor: "op", Reason: "r", RequestID: "v"})
	expectTimeout(t, "revoke beyond the busy timeout", err)
	if !strings.Contains(err.Error(), "locked") {
		t.Fatalf("err = %q, want it to say the file stayed locked", err)
	}
}

// Two writers of one Backend while another connection holds the file's
// lock: they queue on the Backend's write slot and then on the lock, in
// whichever order they arrive. The one with a short deadline answers
// timeout and writes nothing, wherever it was waiting; the other commits
// once the lock is gone.
func TestQueuedWriterTimesOut(t *testing.T) {
	path := migratedFile(t)
	b := open(t, path, nil)
	release := holdWriteLock(t, path)
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "first"})
		first <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("b"), Owner: "w", TTL: time.Minute, RequestID: "second"})
	expectTimeout(t, "queued acquire", err)
	release()
	if err := <-first; err != nil {
		t.Fatalf("first writer after the lock was released: %v", err)
	}
	p, err := b.ReadAudit(ctxT(t), audit.Query{})
	if err != nil || len(p.Records) != 1 || p.Records[0].RequestID != "first" {
		t.Fatalf("audit = %+v, %v; want only the first writer's record", p.Records, err)
	}
}

// Connections opening a fresh file at the same moment all succeed: the
// first switches it to WAL while the others wait for it (switching the
// journal mode fails at once with SQLITE_BUSY, without SQLite's busy wait,
// so OpenDB retries it). Before OpenDB retried, about one round in fifteen
// failed here.
func TestConcurrentFirstOpen(t *testing.T) {
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "fresh.db")
		errs := make(chan error, 6)
		for range cap(errs) {
			go func() {
				db, err := sqlite.OpenDB(path)
				if err == nil {
					var mode string
					err = db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
					if err == nil && mode != "wal" {
						err = errors.New("journal mode " + mode + ", want wal")
					}
					_ = db.Close()
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// A cancelled caller is told so, not that a deadline passed; both are
// timeout (the effect is unknown).
func TestCancelledCallerIsReportedAsCancelled(t *testing.T) {
	b := open(t, migratedFile(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "a"})
	if !errors.Is(err, protocol.ErrTimeout) || !strings.Contains(err.Error(), "cancelled") || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("acquire on a cancelled context: %v, want timeout saying the caller cancelled", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = b.Acquire(dctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "b"})
	if !errors.Is(err, protocol.ErrTimeout) || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("acquire past its deadline: %v, want timeout saying the deadline passed", err)
	}
}
