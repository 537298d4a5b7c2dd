//go:build !windows

package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// TestRunJSONWithAClosedStdoutEndsItsCommand: with -o json, run copies
// CMD's stdout itself (commandOutput). When leasectl's stdout is closed
// under it (leasectl -o json run k -- producer | head -n 1), the copy ends
// on EPIPE; CMD must then see its own writes fail (EPIPE, SIGPIPE), as it
// did through os/exec's copy and as run --help says, and end, so that run
// releases the lease and exits. A copy that stops reading but keeps the
// pipe's read end open leaves CMD blocked in write forever, its lease
// renewed forever.
func TestRunJSONWithAClosedStdoutEndsItsCommand(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close() // nobody will ever read: every write fails with EPIPE
	defer w.Close()
	ended := filepath.Join(t.TempDir(), "ended")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"-o", "json", "run", "k", "--", "sh", "-c",
			`head -c 1000000 /dev/zero; touch "$1"`, "sh", ended}, nil, w, stderr, e.get)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_, statErr := os.Stat(ended)
		status, _ := runCLI(t, e, "get", "k", "-o", "json").json(t)["status"].(string)
		cancel()
		t.Fatalf("run -o json with a closed stdout has not returned 15s after it started a command writing 1 MB "+
			"(the command ended: %v; get k: %s): the command blocks writing into run's pipe, which nobody reads "+
			"and nobody closed, and its lease stays held\nstderr: %s", statErr == nil, status, stderr.String())
	}
	if status, _ := runCLI(t, e, "get", "k", "-o", "json").json(t)["status"].(string); status != "not_found" {
		t.Errorf("after run returned, get k answers %s, want not_found (released)", status)
	}
}
