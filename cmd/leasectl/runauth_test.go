package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A served store that stops accepting run's token while CMD runs (the
// token removed from the tokens file, SIGHUP) refuses its renewals with
// 401: CMD is stopped, as for a loss, and run exits 7, which tells an
// operator the token is the cause (DESIGN: 401/403 exit 7), not 6.
func TestServedRunWhoseTokenIsWithdrawnExits7(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := writeTokens(t, dir, e2eTokens)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "run.db"), nil, "--tokens", tokens)
	c := leasectl{dir: dir, dsn: s.url}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := filepath.Join(dir, "started")
	cmd := c.command(ctx, "run", "e2e/job", "--owner", "w1", "--ttl", "3s", "--",
		"sh", "-c", "touch "+started+"; sleep 60")
	cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+e2eWriter)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // the file is the signal
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within a minute: %s", cmd.Stderr)
		}
	}
	writeTokens(t, dir, strings.ReplaceAll(e2eTokens, e2eWriter+" writer e2e\n", ""))
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		r := finish(t, cmd, cmd.Args[1:], err)
		if r.code != 7 {
			t.Fatalf("run whose token the server withdrew: want exit 7:\n%s", r)
		}
	case <-time.After(time.Minute):
		t.Fatalf("run did not end within a minute of its token's withdrawal: %s", cmd.Stderr)
	}
}
