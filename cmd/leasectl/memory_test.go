package main

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// lineCounter counts the lines written to it and keeps none of them.
type lineCounter struct{ lines int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// TestAuditExportMemoryStaysFlat: `audit export` streams the trail page by
// page, so its peak memory does not follow the trail's length: exporting
// ten times the records takes (nearly) the same maximum resident set.
func TestAuditExportMemoryStaysFlat(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes and exports 100,000 records")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.db")
	c := leasectl{dir: dir, dsn: "sqlite:" + path}
	if r := c.run(t, "health"); r.code != 0 { // creates and migrates the file
		t.Fatalf("health: %s", r)
	}
	// The records are written by testdata/fillaudit, built without the
	// race detector: the same statement run in this race-instrumented
	// process took over a minute.
	add := func(ns string, n int) {
		t.Helper()
		if out, err := exec.Command(fillAudit, path, ns, strconv.Itoa(n)).CombinedOutput(); err != nil {
			t.Fatalf("fillaudit %s %d: %v: %s", ns, n, err, out)
		}
	}
	export := func(ns string, want int) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := c.command(ctx, "audit", "export", "-n", ns)
		// The collector runs at a fixed heap size instead of pacing itself
		// on CPU time, so that a machine starved of CPU does not let the
		// heap grow for reasons of its own: what is left to grow is what
		// export keeps.
		cmd.Env = append(cmd.Env, "GOGC=off", "GOMEMLIMIT=32MiB")
		out := &lineCounter{}
		cmd.Stdout = out
		if err := cmd.Run(); err != nil {
			t.Fatalf("audit export: %v; stderr:\n%s", err, cmd.Stderr)
		}
		if out.lines != want {
			t.Fatalf("audit export printed %d records, want %d", out.lines, want)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	}
	add("small", 10000)
	add("more", 90000)
	// A peak can only be inflated by the machine (a collector starved of
	// CPU lets the heap overshoot its limit), never deflated: on a failed
	// comparison measure again, keeping each side's least peak.
	small, big := int64(math.MaxInt64), int64(math.MaxInt64)
	for attempt := 1; ; attempt++ {
		small = min(small, export("small", 10000))
		big = min(big, export("", 100000))
		t.Logf("peak resident set: %d KiB for 10,000 records, %d KiB for 100,000", small, big)
		if big <= small+small/2 {
			return
		}
		if attempt == 3 {
			t.Fatalf("exporting 10x the records took %d KiB at peak against %d KiB: export buffers the trail", big, small)
		}
	}
}
