package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lineCounter counts the lines written to it and keeps none of them.
type lineCounter struct{ lines int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// watchPeakRSS reads the peak resident set (VmHWM, KiB) of process pid
// from /proc every millisecond until the process is gone; the returned
// function waits for that and gives the largest value read (0 if none).
//
// Not the rusage of the finished process: Go starts a child with
// CLONE_VM|CLONE_VFORK, and Linux carries the parent's peak (this test
// binary's, far above an export's) into the ru_maxrss of a process that
// calls exec from a shared address space, so every export would report
// the same number. VmHWM is the child's own address space's peak. A read
// can miss only what the process adds in its last millisecond.
func watchPeakRSS(pid int) func() int64 {
	var peak int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		file := "/proc/" + strconv.Itoa(pid) + "/status"
		for {
			b, err := os.ReadFile(file)
			_, rest, found := strings.Cut(string(b), "VmHWM:")
			if err != nil || !found { // gone, or exited and not yet reaped (no memory left to read)
				return
			}
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if kib, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					peak = max(peak, kib)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() int64 {
		<-done
		return peak
	}
}

// TestAuditExportMemoryStaysFlat: `audit export` streams the trail page by
// page, so its peak memory does not follow the trail's length: exporting
// ten times the records takes (nearly) the same maximum resident set.
func TestAuditExportMemoryStaysFlat(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes and exports 100,000 records")
	}
	if b, _ := os.ReadFile("/proc/self/status"); !strings.Contains(string(b), "VmHWM:") {
		t.Skip("reads a process's peak resident set from /proc/PID/status (Linux)")
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
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		peak := watchPeakRSS(cmd.Process.Pid)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("audit export: %v; stderr:\n%s", err, cmd.Stderr)
		}
		if out.lines != want {
			t.Fatalf("audit export printed %d records, want %d", out.lines, want)
		}
		kib := peak()
		if kib == 0 {
			t.Fatalf("no peak resident set read from /proc/%d/status while audit export ran", cmd.Process.Pid)
		}
		return kib
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
