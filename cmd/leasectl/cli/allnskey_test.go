package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAllNamespacesWithAKeyIsAUsageError: -A reads every namespace and a
// key is in one, so a key beside -A (audit --key, audit export --key,
// watch KEY) is refused (exit 2, naming -n as the fix) before the store is
// opened: the embedded SQLite file is not created. It was read as the key
// in namespace default (or NS of NS/NAME), -A silently dropped.
func TestAllNamespacesWithAKeyIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"audit", "--key", "k", "-A"},
		{"audit", "--key", "ns/k", "-A", "--follow"},
		{"audit", "export", "--key", "k", "-A"},
		{"watch", "k", "-A"},
		{"watch", "ns/k", "-A", "--since", "1h"},
	} {
		path := filepath.Join(t.TempDir(), "leases.db")
		e := env{EnvDSN: "sqlite:" + path}
		o := runCLIFor(t, 2*time.Second, e, append(args, "-o", "json")...)
		if o.code != ExitUsage || !strings.Contains(o.stdout, "-n NS") {
			t.Errorf("leasectl %s -o json: exit %d, stdout %q; want exit %d, a message naming -n NS instead of -A",
				strings.Join(args, " "), o.code, strings.TrimSpace(o.stdout), ExitUsage)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("leasectl %s: the store %s was created; a usage error is refused before the store is opened", strings.Join(args, " "), path)
		}
	}
}
