package sqlite_test

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// TestReplacedFileRefusesEveryOperationUntilRestarted removes the -shm of
// a file under a serving Backend: its first write after that is refused,
// and from then on every operation, reads included, and Health answer
// unavailable, naming the fix (restart; raise the fencing counter after a
// restore). The Backend restarted
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
