package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOfACommandThatCannotStartTakesNoLease: a CMD that cannot be
// started (not found, exit 127) is known before the lease is taken: run
// refuses it without acquiring, so that nothing is written (no acquire and
// release in the audit trail, no token spent) and a run --wait with a
// mistyped command does not wait for the key, take it from the waiters
// and give it back. It acquired the key, then found CMD missing and
// released it.
func TestRunOfACommandThatCannotStartTakesNoLease(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	missing := filepath.Join(t.TempDir(), "no-such-command")
	for _, cmd := range []string{missing, "leasestore-no-such-command"} {
		o := runCLI(t, e, "run", "nightly", "--owner", "w", "--", cmd)
		wantCode(t, o, exitNotFound)
		if !strings.Contains(o.stderr, "no-such-command") {
			t.Errorf("run -- %s: stderr %q does not name the command", cmd, o.stderr)
		}
	}
	trail := runCLI(t, e, "audit", "-A", "--since", "1h", "-o", "json")
	wantCode(t, trail, ExitOK)
	if recs, _ := trail.json(t)["records"].([]any); len(recs) != 0 {
		t.Errorf("run of a command that cannot start wrote %d audit records, want none: %v", len(recs), recs)
	}
}
