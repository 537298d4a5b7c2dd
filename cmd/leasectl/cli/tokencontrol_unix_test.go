//go:build unix

package cli

import (
	"strings"
	"testing"
)

// LEASESTORE_API_TOKEN holding a control character inside it (two lines
// pasted into a secret) cannot be sent: a bad token, exit 7, its message
// naming the variable and never the token.
func TestServedTokenNoHeaderCanCarryExits7(t *testing.T) {
	t.Parallel()
	e := env{EnvDSN: servedForRun(t, t.TempDir(), false), EnvAPIToken: "run-writer\n0123456789"}
	o := runCLI(t, e, "acquire", "k", "--owner", "w")
	if o.code != ExitAuth || !strings.Contains(o.stderr, EnvAPIToken) || strings.Contains(o.stderr, "0123456789") {
		t.Fatalf("acquire with LEASESTORE_API_TOKEN holding a newline inside: exit %d, stderr %q; want 7, naming %s, not the token",
			o.code, o.stderr, EnvAPIToken)
	}
}
