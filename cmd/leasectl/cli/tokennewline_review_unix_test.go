//go:build unix

package cli

import "testing"

// DESIGN.md's exit codes: 7 unauthenticated or forbidden, "never 5, a bad
// token is not an outage". LEASESTORE_API_TOKEN read with its line's
// newline (an env file, a Kubernetes secret of a file ending in one) is
// either the token (no token of a tokens file holds whitespace) or a bad
// one; leasectl exits 5, the server "could not be reached", though it
// answers every request.
func TestServedTokenWithATrailingNewlineIsNotAnOutage(t *testing.T) {
	t.Parallel()
	e := env{EnvDSN: servedForRun(t, t.TempDir(), false), EnvAPIToken: runWriterToken + "\n"}
	o := runCLI(t, e, "acquire", "k", "--owner", "w")
	if o.code != ExitOK && o.code != ExitAuth {
		t.Fatalf("acquire with LEASESTORE_API_TOKEN=%q (the writer's token and a newline): exit %d, stderr %q; "+
			"want 0 (the token sent trimmed) or 7 (a bad token), never 5", runWriterToken+"\n", o.code, o.stderr)
	}
}
