package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// migratedFile returns the path of a fresh, migrated database file in a
// temporary directory of t: a copy of one file that the migrations made
// for this test binary (closed, so its write-ahead log is checkpointed
// into it). Running goose for each file took a sixth of the contract
// suite's CPU.
func migratedFile(t testing.TB) string {
	t.Helper()
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "leasestore-sqlite-template-")
		if err != nil {
			template.err = err
			return
		}
		template.path = filepath.Join(dir, "leases.db")
		template.err = migrateFile(template.path)
	})
	if template.err != nil {
		t.Fatalf("migrated template: %v", template.err)
	}
	data, err := os.ReadFile(template.path)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "leases.db")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// template is the migrated file migratedFile copies, made once per test
// binary; TestMain removes its directory.
var template struct {
	once sync.Once
	path string
	err  error
}

// migrateFile creates and migrates the SQLite file at path and closes it.
func migrateFile(path string) error {
	db, err := sqlite.OpenDB(path)
	if err != nil {
		return err
	}
	if _, err := migrations.Up(context.Background(), migrations.SQLite, db); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// open opens path with a clock (nil for the wall clock) and closes the
// backend when the test ends.
func open(t testing.TB, path string, clock *testClock) *sqlite.Backend {
	t.Helper()
	cfg := &sqlite.Config{}
	if clock != nil {
		cfg = sqlite.WithTestClock(cfg, clock.Now)
	}
	b, err := sqlite.Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func key(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }

// testClock is a manual clock for the focused tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *testClock {
	return &testClock{now: time.Date(2030, 1, 2, 3, 4, 5, 678000, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// wantStatus fails the test unless the call answered status want.
func wantStatus(t testing.TB, what string, res protocol.Result, err error, want protocol.Status) {
	t.Helper()
	if err != nil || res.Status != want {
		t.Fatalf("%s: %q (%s), %v; want status %q", what, res.Status, res.Message, err, want)
	}
}

// waitQueued waits until n writes wait for b's next batch, failing the
// test when ctx ends first.
func waitQueued(ctx context.Context, t testing.TB, b *sqlite.Backend, n int) {
	t.Helper()
	for sqlite.WriteQueueLen(b) != n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d writes queued before the batch's deadline, want %d", sqlite.WriteQueueLen(b), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// otherHandle opens another handle on the store's file at path, as a DBA's
// sqlite3 shell or a script would, closed when the test ends.
func otherHandle(t *testing.T, path string) *sql.DB {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	return other
}
