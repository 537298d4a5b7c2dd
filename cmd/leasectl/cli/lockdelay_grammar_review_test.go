package cli

import (
	"strings"
	"testing"
)

// The lock-delay lines of the table output write durations in the one
// grammar (DESIGN.md contract v3: 90s, 15m, 1h30m, 2d), as the lock-delay
// itself is written ("lock-delay 30m"): the time left until the key is
// free, after a revoke and in a get during the delay, reads "in 30m", not
// Go's "in 30m0s".
func TestLockDelayTimeLeftIsWrittenInTheOneGrammar(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "job", "--owner", "w1", "--ttl", "1h", "--lock-delay", "30m"), 0)
	rev := runCLI(t, e, "revoke", "job", "--reason", "stuck")
	wantCode(t, rev, 0)
	get := runCLI(t, e, "get", "job")
	wantCode(t, get, 4)
	for what, out := range map[string]string{"revoke": rev.stdout, "get": get.stdout} {
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "lock-delay") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("%s: no lock-delay line in\n%s", what, out)
		}
		if strings.Contains(line, "m0s") || strings.Contains(line, "h0m") {
			t.Errorf("%s: the lock-delay line writes a duration as Go does, not in the one grammar (30m, 1h30m):\n%s", what, line)
		}
	}
}
