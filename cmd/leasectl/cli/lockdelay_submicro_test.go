package cli

import (
	"strings"
	"testing"
)

// --lock-delay under the microsecond, which the store would keep as
// none (skipping the namespace default too), is refused as a usage error
// naming the 1µs resolution, before anything is sent: acquire and run.
func TestSubMicrosecondLockDelayFlagIsRefused(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, args := range [][]string{
		{"acquire", "job", "--owner", "w1", "--ttl", "1m", "--lock-delay", "500ns"},
		{"run", "job", "--owner", "w1", "--ttl", "1m", "--lock-delay", "500ns", "--", "true"},
	} {
		o := runCLI(t, e, args...)
		if o.code != 2 || !strings.Contains(o.stderr, "1µs") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming the 1µs resolution", args, o.code, o.stderr)
		}
	}
	wantCode(t, runCLI(t, e, "get", "job"), 4) // nothing taken
}
