package cli

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestRunOfACommandThatCannotStartPrintsItsResultInJSON: with -o json,
// run prints one object in the shape of its answer (a result, as acquire
// does) when it fails before CMD starts, as the operator guide says ("a
// lease command, and run before CMD starts, prints its result object")
// and as its conflict and its refused input do. A CMD that cannot be
// started is found before the lease is taken (exec.LookPath), so before
// CMD starts; run exited 127 printing nothing on stdout.
func TestRunOfACommandThatCannotStartPrintsItsResultInJSON(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "held", "--owner", "other"), ExitOK)
	conflict := runCLI(t, e, "run", "held", "-o", "json", "--", "true")
	wantCode(t, conflict, ExitConflict)
	missing := filepath.Join(t.TempDir(), "no-such-command")
	o := runCLI(t, e, "run", "nightly", "-o", "json", "--", missing)
	wantCode(t, o, exitNotFound)
	if got, want := keys(o.json(t)), keys(conflict.json(t)); !slices.Equal(got, want) {
		t.Errorf("leasectl run -o json -- %s (cannot start) printed the keys %v; run's answer has %v", missing, got, want)
	}
}
