package cli

import (
	"strings"
	"testing"
)

// run --wait that gives up at --wait-timeout while the key is held says
// that the wait timed out, as acquire --wait does ("the deadline
// passed"), not that it was cancelled: nothing cancelled it, and a user
// reading "(cancelled)" looks for an interrupt that never came.
func TestRunWaitTimeoutSaysItTimedOut(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "holder", "--ttl", "1h"), ExitOK)
	for _, args := range [][]string{
		{"acquire", "k", "--owner", "w", "--wait", "--wait-timeout", "100ms", "-o", "json"},
		{"run", "k", "--owner", "w", "--wait", "--wait-timeout", "100ms", "-o", "json", "--", "true"},
	} {
		o := runCLI(t, e, args...)
		wantCode(t, o, ExitConflict)
		msg, _ := o.json(t)["message"].(string)
		if !strings.Contains(msg, "gave up waiting") || strings.Contains(msg, "cancelled") {
			t.Errorf("%s: message %q, want it to say it gave up waiting at the wait timeout, not that it was cancelled",
				strings.Join(args, " "), msg)
		}
	}
}
