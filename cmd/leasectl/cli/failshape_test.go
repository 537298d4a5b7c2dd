package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestJSONFailureKeepsTheCommandsShape: with -o json a command prints one
// object, in the shape of its own answer also when it fails before or
// instead of answering (failureJSON: "a result for the lease commands").
// describe answers a result with its records, and run before CMD starts
// answers as acquire does (a result: conflict, interrupted); both printed
// a bare {"status","message"} when the input was refused (exit 2), the
// same command's conflict a result, so a script reading .lease or
// .request_id of run -o json met a field that is there on one failure
// and missing on another.
func TestJSONFailureKeepsTheCommandsShape(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "held", "--owner", "other"), ExitOK)
	answer := runCLI(t, e, "describe", "held", "-o", "json")
	wantCode(t, answer, ExitOK)
	conflict := runCLI(t, e, "run", "held", "-o", "json", "--", "true")
	wantCode(t, conflict, ExitConflict)
	for _, c := range []struct {
		want outcome
		args []string
	}{
		{answer, []string{"describe", "ns/"}},
		{answer, []string{"describe", "held", "--records", "0"}},
		{conflict, []string{"run", "held", "--ttl", "0s", "--", "true"}},
		{conflict, []string{"run", "ns/", "--", "true"}},
	} {
		o := runCLI(t, e, append([]string{"-o", "json"}, c.args...)...)
		wantCode(t, o, ExitUsage)
		got, want := keys(o.json(t)), keys(c.want.json(t))
		if !slices.Equal(got, want) {
			t.Errorf("leasectl -o json %s (refused) printed the keys %v; the command's answer has %v",
				strings.Join(c.args, " "), got, want)
		}
	}
}
