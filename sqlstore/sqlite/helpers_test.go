package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// migratedFile returns the path of a fresh, migrated database file in a
// temporary directory of t.
func migratedFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leases.db")
	migrate(t, path)
	return path
}

func migrate(t testing.TB, path string) {
	t.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatalf("OpenDB: %v", err)
	}
	defer db.Close()
	if _, err := migrations.Up(context.Background(), migrations.SQLite, db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
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
