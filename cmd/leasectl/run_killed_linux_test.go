package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunCommandDiesWithKilledLeasectl: when leasectl run itself is
// killed (SIGKILL: the OOM killer, a supervisor's hard stop, kill -9), it
// can neither renew nor signal CMD, which runs in a process group of its
// own. CMD runs on; the lease runs out after its TTL and another holder
// takes the key while CMD still works under the old lease: two commands
// at once under one key, the very thing run exists to prevent. On Linux
// CMD gets SIGKILL when run dies (SysProcAttr.Pdeathsig, from a thread
// that lives as long as CMD).
func TestRunCommandDiesWithKilledLeasectl(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	p := c.start(t, "run", "killed-run", "--ttl", "1s", "--", "sh", "-c", `echo "pid $$"; exec sleep 60 </dev/null >/dev/null 2>&1`)
	line := p.expect(p.out, "pid ")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL to leasectl run
		t.Fatal(err)
	}
	_ = p.wait()
	// Past the lease's TTL: anyone may take the key now.
	time.Sleep(1500 * time.Millisecond)
	r := c.run(t, "acquire", "killed-run", "--owner", "second", "-o", "json")
	cmdAlive := running(pid)
	if r.code == 0 && cmdAlive {
		t.Fatalf("leasectl run was SIGKILLed: its command (pid %d) still runs 1.5s later, after its lease (ttl 1s) ran out and another owner acquired the key (exit %d): two holders at once", pid, r.code)
	}
	if cmdAlive {
		t.Fatalf("leasectl run was SIGKILLed: its command (pid %d) still runs 1.5s later, with nobody renewing its lease", pid)
	}
}

// running reports whether process pid runs: it exists and is not a
// zombie. A killed orphan is a zombie until init reaps it, which an init
// that reaps late (as some containers' do) leaves it for a while.
func running(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold anything.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) == 0 || (f[0] != "Z" && f[0] != "X")
}
