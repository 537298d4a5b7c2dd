//go:build linux

package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/fullfs"
)

// leasectl creates and migrates a SQLite store on first use. On a file
// system with a few dozen KiB left (a real tmpfs: ENOSPC), the migration
// fails for want of space, and leasectl must say the disk is full (exit 5),
// so the operator frees space. Before a fix the failure is taken for a
// collision with another process and retried until the deadline, and
// leasectl prints `store: open sqlite:...: timeout: store: migrate sqlite:
// migrations: up: failed to initialize: context deadline exceeded`: the
// full disk is named nowhere (only the debug log has it).
func TestFirstUseOnAFullDiskSaysTheDiskIsFull(t *testing.T) {
	t.Parallel()
	for _, kib := range []int64{36, 44} {
		t.Run(fmt.Sprintf("%dKiB_free", kib), func(t *testing.T) {
			dir := fullfs.Mount(t, 1<<20)
			fullfs.Fill(t, dir, kib<<10)
			e := env{EnvDSN: "sqlite:" + filepath.Join(dir, "leases.db")}
			o := runCLI(t, e, "acquire", "k", "--owner", "o", "--timeout", "3s", "-o", "json")
			m := o.json(t)
			t.Logf("exit %d: %v", o.code, m["message"])
			if o.code != 5 {
				t.Errorf("exit code %d, want 5", o.code)
			}
			msg, _ := m["message"].(string)
			if l := strings.ToLower(msg); !strings.Contains(l, "disk is full") && !strings.Contains(l, "no space") {
				t.Errorf("first use on a full file system answered %q (status %v): it does not say the disk is full", msg, m["status"])
			}
		})
	}
}
