package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPythonClient runs examples/python/smoke.py, the Python client (standard
// library only) driving a real leasectl serve on a free port with a tokens
// file: acquire, renew (keeping the TTL), a conflict, a fenced write, revoke,
// list, namespaces, renew many (past one request's 1,000 renewals and 1 MiB
// of body too), release, audit, a reader's 403, a removed
// token's 401 and a notify wait. Without python3 it skips, except in CI.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is not on PATH (CI is set, so this fails rather than skips): %v", err)
		}
		t.Skipf("python3 is not on PATH: the Python client's test needs it (%v)", err)
	}
	const (
		writer  = "py-writer-token-000000"
		admin   = "py-admin-token-0000000"
		reader  = "py-reader-token-000000"
		removed = "py-removed-token-00000"
	)
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "py.db"), nil, "--tokens",
		writeTokens(t, dir, writer+" writer py\n"+admin+" admin *\n"+reader+" reader py\n"))
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "python", "smoke.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "LEASESTORE_URL="+s.url,
		"WRITER_TOKEN="+writer, "ADMIN_TOKEN="+admin, "READER_TOKEN="+reader, "REMOVED_TOKEN="+removed)
	out, err := cmd.CombinedOutput()
	t.Logf("smoke.py:\n%s", out)
	if err != nil {
		t.Fatalf("smoke.py: %v", err)
	}
}
