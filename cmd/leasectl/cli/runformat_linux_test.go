package cli

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The probe by which run tells, before it takes the lease, whether a
// file in a format it does not recognise can be executed executes it
// stopped before its first instruction: a program the kernel starts is
// not run (a script that would create a file creates none), and one it
// cannot start is refused with ENOEXEC.
func TestProbeExecRunsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := probeExec(script); err != nil {
		t.Fatalf("probeExec of a #! script: %v, want nil", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("touch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkFormat(plain); !errors.Is(err, syscall.ENOEXEC) {
		t.Errorf("checkFormat of a script without a #! line: %v, want ENOEXEC", err)
	}
	time.Sleep(100 * time.Millisecond) // a program the probe let run would have touched mark by now
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("probeExec ran the script it probed: %s exists", mark)
	}
}
