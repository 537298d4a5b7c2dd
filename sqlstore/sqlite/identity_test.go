package sqlite_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestReplacedFileRefusesEveryOperationUntilRestarted removes the -shm of
// a file under a serving Backend: its first write after that is refused,
// and from then on every operation, reads included, and Health answer
// unavailable matching sqlite.ErrFileReplaced, naming the fix (restart;
// raise the fencing counter after a restore). The Backend restarted
// against the file at the path serves it, above every token issued.
func TestReplacedFileRefusesEveryOperationUntilRestarted(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	t.Parallel()
	path := migratedFile(t)
	svc := open(t, path, nil)
	held := cycleKey(t, svc, "k", "svc", "before", true)
	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}

	refused := func(what string, err error) {
		t.Helper()
		expectStatus(t, what, err, protocol.StatusUnavailable, "-shm", "restart", "leasectl fencing raise")
		if !errors.Is(err, sqlite.ErrFileReplaced) {
			t.Fatalf("%s: %v; want it to match sqlite.ErrFileReplaced", what, err)
		}
	}
	_, err := svc.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "svc", Token: held, TTL: time.Hour, RequestID: "r"})
	refused("renew", err)
	_, err = svc.Get(ctxT(t), protocol.GetRequest{Key: key("k"), RequestID: "g"})
	refused("get", err)
	_, err = svc.List(ctxT(t), protocol.ListRequest{Namespace: "ns", RequestID: "l"})
	refused("list", err)
	_, err = svc.ReadAudit(ctxT(t), audit.Query{Namespace: "ns"})
	refused("audit", err)
	_, err = svc.PruneAudit(ctxT(t), audit.PruneRequest{Before: time.Now().Add(-time.Hour), Actor: "ops", RequestID: "p"})
	refused("prune", err)
	refused("health", svc.Health(ctxT(t)))

	restarted := open(t, path, nil)
	if err := restarted.Health(ctxT(t)); err != nil {
		t.Fatalf("health of the Backend restarted against the file: %v", err)
	}
	if tok := cycleKey(t, restarted, "k2", "svc", "after", false); tok <= held {
		t.Fatalf("the restarted Backend issued token %d, not above %d", tok, held)
	}
}

// TestPoolThatClosesItsConnectionsIsNoReplacedFile: SQLite removes a
// file's -wal and -shm when the last connection to it closes, and the next
// one makes a new -shm. A borrowed *sql.DB that keeps no idle connection
// closes its last one after each operation; the Backend must not take the
// new -shm for a replaced one (it keeps a connection of its own open).
func TestPoolThatClosesItsConnectionsIsNoReplacedFile(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	db := rawDB(t, path)
	db.SetMaxIdleConns(0)
	b, err := sqlite.New(ctxT(t), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(ctxT(t)) })
	for i := range 5 {
		cycleKey(t, b, "k", "w", fmt.Sprint("c", i), false)
		if err := b.Health(ctxT(t)); err != nil {
			t.Fatalf("health after cycle %d: %v", i, err)
		}
	}
	if n := db.Stats().OpenConnections; n != 0 {
		t.Fatalf("the pool keeps %d connections open; the test needs it to close its last one", n)
	}
	if _, err := os.Stat(path + "-shm"); err != nil {
		t.Fatalf("the -shm file while the Backend runs: %v", err)
	}
}
