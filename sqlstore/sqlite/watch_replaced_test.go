package sqlite_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestWatchEndsWhenTheFileIsPutBack: a watch (audit.Watch, under
// `leasectl audit --follow` and `leasectl watch`) whose Backend finds its
// file put back under it meets a refusal matching sqlite.ErrFileReplaced,
// which no retry mends: the Backend refuses every operation until it is
// restarted. The watch yields it once and ends, rather than retrying it
// every interval for ever.
func TestWatchEndsWhenTheFileIsPutBack(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	t.Parallel()
	path := migratedFile(t)
	w, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cycleKey(t, w, "k", "w", "before", false)
	if err := w.Close(ctxT(t)); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	follower := open(t, path, nil)
	q := audit.Query{Namespace: key("k").Namespace}
	cursor, err := audit.Tail(ctxT(t), follower, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Cursor = cursor

	putBack(t, path, backup)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var failures []error
	for _, err := range audit.Watch(ctx, follower, q, &audit.WatchConfig{Interval: 10 * time.Millisecond}) {
		if err == nil {
			t.Fatal("the watch yielded a record of the replaced file")
		}
		failures = append(failures, err)
	}
	if ctx.Err() != nil || len(failures) != 1 {
		t.Fatalf("the watch of a Backend whose file was put back yielded %d failures and ended only when its context did "+
			"(%v); want one refusal, ending it: no retry mends it. First: %v", len(failures), ctx.Err(), firstErr(failures))
	}
	if !errors.Is(failures[0], sqlite.ErrFileReplaced) {
		t.Fatalf("the watch ended with %v; want an error matching sqlite.ErrFileReplaced", failures[0])
	}
	if !errors.Is(failures[0], protocol.ErrRestartRequired) {
		t.Fatalf("the watch ended with %v; want an error matching protocol.ErrRestartRequired", failures[0])
	}
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
