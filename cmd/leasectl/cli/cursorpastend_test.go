package cli

import (
	"strings"
	"testing"
	"time"
)

// TestFollowFromACursorPastTheEndIsRefused: watch, audit --follow and
// audit export from a cursor no record of the store has reached (a
// cursor of another store) exit 2 naming why. They followed from it,
// printing nothing until the trail caught up with the cursor.
func TestFollowFromACursorPastTheEndIsRefused(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	for _, args := range [][]string{
		{"watch", "--cursor", "a1.1099511627776"},
		{"watch", "k", "--cursor", "a1.1099511627776"},
		{"audit", "--follow", "--cursor", "a1.1099511627776"},
		{"audit", "export", "--cursor", "a1.1099511627776"},
	} {
		o := runCLIFor(t, 3*time.Second, e, append(args, "-o", "json")...)
		if o.code != ExitUsage || !strings.Contains(o.stdout, "past the end of this store's audit trail") {
			t.Errorf("leasectl %s -o json: exit %d, stdout %q; want exit %d, a message naming the end of the trail",
				strings.Join(args, " "), o.code, strings.TrimSpace(o.stdout), ExitUsage)
		}
	}
}
