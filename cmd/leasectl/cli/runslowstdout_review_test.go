//go:build linux

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// slowWriter takes every write, each after a pause: a stdout read slowly
// (a terminal over a slow link, a busy consumer).
type slowWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *slowWriter) Write(b []byte) (int, error) {
	time.Sleep(300 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

// TestRunJSONEndsWhileAProcessOutsideTheGroupKeepsWriting: run --help and
// the operator guide say a process CMD leaves outside its group that keeps
// the stdout pipe open gets 1s after the release, then run closes the
// pipe. When that process keeps writing and leasectl's stdout is slower
// than it, run's copy is always in a write when finish looks, and run
// never ends: it must end within a few seconds of the release whatever
// the pace of its stdout (os/exec's WaitDelay bounded it before).
func TestRunJSONEndsWhileAProcessOutsideTheGroupKeepsWriting(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := &slowWriter{}
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	started := time.Now()
	go func() {
		done <- Execute(ctx, []string{"-o", "json", "run", "k", "--", "sh", "-c",
			`setsid sh -c 'echo $$ > "$1"; while :; do echo daemon; done' sh "$1" & sleep 0.3; echo main done`,
			"sh", pidFile}, nil, out, stderr, e.get)
	}()
	select {
	case code := <-done:
		t.Logf("run exited %d after %s", code, time.Since(started).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		status, _ := runCLI(t, e, "get", "k", "-o", "json").json(t)["status"].(string)
		t.Fatalf("run -o json has not returned 15s after it started a command that ended in 0.3s, leaving a process "+
			"outside its group writing to its stdout, read slowly (get k: %s): want the pipe closed 1s after the "+
			"release, as run --help says\nstderr: %s", status, stderr.String())
	}
}
