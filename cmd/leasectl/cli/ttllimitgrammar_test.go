package cli

import (
	"strings"
	"testing"
)

// A duration past a flag's limit is refused quoting the limit in the
// grammar the user writes (DESIGN.md: one duration grammar, days
// included): --ttl 8d is outside 1ms to 7d, not "to 168h", which the
// user must convert back to compare with what was typed.
func TestTTLLimitIsQuotedInDays(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLI(t, e, "acquire", "k", "--ttl", "8d")
	wantCode(t, o, ExitUsage)
	if !strings.Contains(o.stderr, "8d is outside 1ms to 7d") || strings.Contains(o.stderr, "168h") {
		t.Errorf("acquire --ttl 8d: stderr %q; want \"8d is outside 1ms to 7d\", no 168h", o.stderr)
	}
}
