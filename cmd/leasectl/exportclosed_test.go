package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// audit export whose stdout is closed before it prints (audit export |
// ssh archive 'cat >> trail' with the connection gone) exits 141 and
// claims no record as exported: the resume cursor it logs is the one
// after the last line that reached stdout, so resuming from it never
// skips a record nobody received.
func TestAuditExportToAClosedStdoutClaimsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	for _, k := range []string{"a", "b", "c"} {
		c.runJSON(t, 0, "acquire", k, "--owner", "w")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close() // the reader is gone before the first line
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"audit", "export"}
	cmd := c.command(ctx, args...)
	cmd.Stdout = w
	err = cmd.Run()
	_ = w.Close()
	cmd.Stdout = &bytes.Buffer{}
	got := finish(t, cmd, args, err)
	if got.code != 141 {
		t.Errorf("audit export with its stdout closed: exit %d, want 141\n%s", got.code, got)
	}
	if strings.Contains(got.stderr, "exported=3") || strings.Contains(got.stderr, "a1.3") {
		t.Errorf("audit export with its stdout closed claims the 3 records it could not print:\n%s", got.stderr)
	}
}
