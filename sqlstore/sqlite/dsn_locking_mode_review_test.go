package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestURILockingModeExclusiveIsRefusedByName: a "file:" URI whose _pragma
// sets locking_mode(EXCLUSIVE) (a connection that keeps the file's lock,
// which no other connection, of the pool or of another process, may then
// take) is neither overridden nor refused by name: Open fails with "disk
// I/O error", which sends an operator after a failing disk. It should be
// overridden (the store then serves, also beside another handle), or
// refused naming locking_mode.
func TestURILockingModeExclusiveIsRefusedByName(t *testing.T) {
	path := migratedFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := sqlite.Open(ctx, "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)", nil)
	if err != nil {
		if !strings.Contains(err.Error(), "locking_mode") {
			t.Fatalf("Open with _pragma=locking_mode(EXCLUSIVE): %v; want a refusal naming locking_mode, or the pragma overridden", err)
		}
		return
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	other := open(t, path, nil)
	for i, be := range []*sqlite.Backend{b, other} {
		res, err := protocol.New(be, nil).Acquire(ctx, protocol.AcquireRequest{Key: key("k" + string(rune('a'+i))), Owner: "o", TTL: time.Minute})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
}
