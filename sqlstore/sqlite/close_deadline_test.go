package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestCloseAnswersByItsDeadline: Close waits for the writes in flight, and
// one waits here for the file's write lock, which another connection holds
// (another process, a sqlite3 shell) for longer than Close's context
// allows. Close returned only once that connection let go, whatever its
// context said (protocol.Runtime.Close gives a backend's Close a grace of
// 5s and then waits as long as it takes). Close must answer by its
// deadline, with an error that matches the context's and says what it
// left; the Backend still ends closed: later calls answer closed, the
// write begun before Close is not committed after Close returned, and the
// file is closed once the write ended (a second Close waits for that and
// answers nil).
func TestCloseAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	path := migratedFile(t)
	// A busy timeout longer than the test: only the contexts end the wait.
	b, err := sqlite.Open(ctx, path, &sqlite.Config{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	other := otherHandle(t, path)
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire waits for the write lock
	const held = 3 * time.Second
	release := time.AfterFunc(held, func() {
		_, _ = lock.ExecContext(context.Background(), "ROLLBACK")
		_ = lock.Close()
	})
	defer release.Stop()

	cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	cerr := b.Close(cctx)
	took := time.Since(start)
	if took > time.Second {
		t.Fatalf("Close with a 300ms context, while a write waits for the write lock another connection holds for %v: "+
			"returned after %v (%v); want by its deadline", held, took.Round(time.Millisecond), cerr)
	}
	if !errors.Is(cerr, context.DeadlineExceeded) || !strings.Contains(cerr.Error(), "write") {
		t.Errorf("Close cut off by its deadline: %v; want an error matching context.DeadlineExceeded that says it left a write", cerr)
	}
	t.Logf("Close cut off: %v", cerr)
	if _, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("get after a Close cut off by its deadline: %v; want closed", err)
	}
	if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k2"), Owner: "w", TTL: time.Minute, RequestID: "r2"}); !errors.Is(err, protocol.ErrClosed) {
		t.Errorf("acquire after a Close cut off by its deadline: %v; want closed", err)
	}

	// The write ends once the lock is free; nothing was committed.
	aerr := <-done
	if !errors.Is(aerr, protocol.ErrClosed) {
		t.Errorf("the acquire that waited for the write lock as Close began: %v; want closed (nothing written)", aerr)
	}
	var n int
	if err := other.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit WHERE request_id = 'r1'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the acquire begun before Close committed after Close returned (it answered %v)", aerr)
	}
	// A second Close waits for the first to finish, and the file is closed.
	if err := b.Close(ctx); err != nil {
		t.Errorf("second Close, once the write ended: %v; want nil", err)
	}
	_ = other.Close()
	if runtime.GOOS == "linux" {
		if fds := openFiles(t, path); len(fds) > 0 {
			t.Errorf("after Close finished, the process still has %s open", strings.Join(fds, ", "))
		}
	}
}

// openFiles returns the files of the process (Linux: /proc/self/fd) that
// are path or its -wal or -shm.
func openFiles(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && (target == path || target == path+"-wal" || target == path+"-shm") {
			out = append(out, target)
		}
	}
	return out
}

// TestCloseWithAnEndedContextClosesAnIdleBackend: Close given a context
// that has ended already (a shutdown whose budget is spent, a Runtime
// whose in-flight operations used up its context) answered timeout at
// once, saying it left "its start", on a Backend with nothing in flight,
// whose shutdown waits for nothing: the caller was told the Backend might
// still hold its file, and the file stayed open until the background
// shutdown ended. With nothing in flight Close must finish and answer nil,
// from Open (the file closed when it returns) and from New (the borrowed
// *sql.DB left open).
func TestCloseWithAnEndedContextClosesAnIdleBackend(t *testing.T) {
	t.Parallel()
	for _, from := range []string{"Open", "New"} {
		t.Run(from, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			path := migratedFile(t)
			var (
				b   *sqlite.Backend
				db  *sql.DB
				err error
			)
			if from == "Open" {
				b, err = sqlite.Open(ctx, path, nil)
			} else {
				db = rawDB(t, path)
				b, err = sqlite.New(ctx, db, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Calls that ended: nothing is in flight.
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
			if err != nil || res.Status != protocol.StatusAcquired {
				t.Fatalf("acquire: %v %v", res.Status, err)
			}
			if _, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); err != nil {
				t.Fatal(err)
			}
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			start := time.Now()
			if err := b.Close(ended); err != nil {
				t.Fatalf("Close with a context that had ended, nothing in flight: %v (after %v); want nil: the shutdown waits for nothing",
					err, time.Since(start).Round(time.Millisecond))
			}
			if _, err := b.Get(ctx, protocol.GetRequest{Key: key("k")}); !errors.Is(err, protocol.ErrClosed) {
				t.Errorf("get after Close: %v; want closed", err)
			}
			if err := b.Close(ended); err != nil {
				t.Errorf("second Close with an ended context: %v; want the first's nil", err)
			}
			if from == "New" {
				if err := db.PingContext(ctx); err != nil {
					t.Errorf("the *sql.DB given to New was closed: %v", err)
				}
				return
			}
			if runtime.GOOS == "linux" {
				if fds := openFiles(t, path); len(fds) > 0 {
					t.Errorf("after Close answered nil, the process still has %s open", strings.Join(fds, ", "))
				}
			}
		})
	}
}
