package etcdcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMembersEndWithTheTestProcess: a test process killed outright (as by
// go test's timeout, which skips every cleanup) takes its members with it.
// Before -exit-with-stdin its members ran on, and two hung test runs left
// eight of them on the machine.
func TestMembersEndWithTheTestProcess(t *testing.T) {
	if os.Getenv("LEASESTORE_ETCDCLUSTER_CHILD") == "1" {
		c, err := Start(context.Background(), &Options{Members: 1})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("member", c.Members[0].cmd.Process.Pid, c.root)
		select {} // until killed
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads process states from /proc")
	}
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	t.Parallel()
	child := exec.Command(os.Args[0], "-test.run=^TestMembersEndWithTheTestProcess$", "-test.timeout=10m")
	child.Env = append(os.Environ(), "LEASESTORE_ETCDCLUSTER_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// On every way out: a child left running would keep its member too.
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	var pid int
	var root string
	if _, serr := fmt.Sscanf(line, "member %d %s", &pid, &root); err != nil || serr != nil {
		t.Fatalf("the child test process said %q (%v)", line, err)
	}
	defer os.RemoveAll(root)
	if !running(pid) {
		t.Fatalf("member %d is not running while its test process lives", pid)
	}
	_ = child.Process.Kill() // SIGKILL: no cleanup runs
	_ = child.Wait()
	for deadline := time.Now().Add(30 * time.Second); running(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
			t.Fatalf("member %d still runs 30s after its test process was killed", pid)
		}
	}
}

// running reports whether pid is a live process (not gone, not a zombie
// waiting for init to reap it).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// TestBuildConcurrently: tests of one binary start clusters in parallel,
// and on a machine whose cache has no member program yet each builds it.
// They used to build into the same temporary file (named after the
// process id), and all but the first failed to rename it into place
// ("no such file or directory"): every etcd test of leasectl failed on a
// fresh machine. The cache directory is the test's own; Go's build cache
// stays the user's, so only the link step runs.
func TestBuildConcurrently(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the member program")
	}
	cache := t.TempDir()
	const builders = 4
	// Builds that overlap rename one after another: each waits, before
	// its rename, for the others to get there, or 2 s (with builds one at
	// a time, the first waits in vain and the others find the program).
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	beforeRename = func() {
		mu.Lock()
		if arrived++; arrived == builders {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(2 * time.Second):
		}
	}
	t.Cleanup(func() { beforeRename = nil })
	errs := make(chan error, builders)
	bins := make(chan string, builders)
	for range builders {
		go func() {
			bin, err := buildIn(t.Context(), cache)
			errs <- err
			bins <- bin
		}()
	}
	for range builders {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		bin := <-bins
		if bin == "" {
			continue
		}
		if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: %v, mode %v: want the member program", bin, err, fi.Mode())
		}
	}
}
