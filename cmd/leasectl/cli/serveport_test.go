package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesAPortOutOfRange: --listen with a port no listener can
// have (99999, -1, a name no service has) is bad input, refused as
// --listen 7070 is: exit 2, before any store is opened. It was found only
// when listening, after the SQLite store was created and migrated, and
// answered exit 5 (unavailable), which a supervisor retries as an outage.
func TestServeRefusesAPortOutOfRange(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:no-such-service"} {
		path := filepath.Join(t.TempDir(), "never.db")
		o := runCLI(t, env{EnvDSN: "sqlite:" + path}, "serve", "--listen", listen)
		if o.code != ExitUsage {
			t.Errorf("serve --listen %s: exit %d, stderr %q; want %d (bad input)", listen, o.code, strings.TrimSpace(o.stderr), ExitUsage)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("serve --listen %s was refused but created the store %s", listen, path)
		}
	}
}
