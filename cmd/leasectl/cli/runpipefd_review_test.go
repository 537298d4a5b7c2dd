//go:build linux

package cli

import (
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRunJSONClosesItsOutputPipe: run -o json copies CMD's stdout through
// a pipe of its own (commandOutput); a program that embeds leasectl
// (Execute) and runs it many times must get both ends back when run
// returns, not when the garbage collector finalizes them (os/exec closed
// its pipe's read end once its copy ended). Not parallel: the count is
// the whole process's, and the collector is off while it runs.
func TestRunJSONClosesItsOutputPipe(t *testing.T) {
	e := sqliteEnv(t)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func() {
		var out, errb bytes.Buffer
		if code := Execute(ctx, []string{"-o", "json", "run", "k", "--", "sh", "-c", "echo hi"}, nil, &out, &errb,
			e.get); code != 0 {
			t.Fatalf("run exited %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
		}
	}
	run() // whatever one run opens once (the store's files, caches)
	before := openFDs(t)
	const runs = 10
	for range runs {
		run()
	}
	if after := openFDs(t); after > before+2 {
		t.Fatalf("%d runs of run -o json left %d more open file descriptors (%d before, %d after): each leaves its "+
			"output pipe's read end open until the garbage collector closes it", runs, after-before, before, after)
	}
}
