package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestDirectCallWithoutDeadlineAnswersWhileTheFileIsLocked: the runtime
// gives every operation a deadline (protocol.DefaultTimeout when the
// caller gives none); a Backend called directly with a context that has
// none must answer as the runtime would while another connection (another
// process, a sqlite3 shell) holds the file's write lock for longer than
// that, here under a busy timeout of a minute: by the default deadline,
// timeout or unavailable.
func TestDirectCallWithoutDeadlineAnswersWhileTheFileIsLocked(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	path := migratedFile(t)
	b, err := sqlite.Open(ctx, path, &sqlite.Config{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) }) // after the lock's release, below
	holdWriteLock(t, path)
	answered := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := b.Acquire(context.Background(), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Minute, RequestID: "r1"})
		answered <- err
	}()
	select {
	case err := <-answered:
		took := time.Since(start)
		if st := protocol.StatusOf(err); st != protocol.StatusTimeout && st != protocol.StatusUnavailable {
			t.Errorf("acquire without a deadline, the file locked: %v after %v; want timeout or unavailable", err, took.Round(time.Millisecond))
		}
		if took > protocol.DefaultTimeout+3*time.Second {
			t.Errorf("acquire without a deadline, the file locked: answered after %v; want by the default deadline %v",
				took.Round(time.Millisecond), protocol.DefaultTimeout)
		}
		t.Logf("answered after %v: %v", took.Round(time.Millisecond), err)
	case <-time.After(20 * time.Second):
		t.Errorf("acquire without a deadline, the file locked: no answer after 20s; want one by the default deadline %v "+
			"(protocol.DefaultTimeout), as the runtime gives", protocol.DefaultTimeout)
	}
}
