package cli

import (
	"strings"
	"testing"
)

// serve logs the durations of its flags in the one duration grammar the
// flags take (--audit-retention 30d logs keep=30d, --shutdown-timeout 1m
// logs timeout=1m), never Go's 720h0m0s or 1m0s (contract v3): an operator
// greps the log for what they configured.
func TestReviewServeLogsDurationsInTheGrammar(t *testing.T) {
	t.Parallel()
	o := runCLIInterruptedOnLog(t, "INF serving", sqliteEnv(t),
		"serve", "--listen", "127.0.0.1:0", "--audit-retention", "30d", "--shutdown-timeout", "1m")
	if o.code != ExitOK {
		t.Fatalf("serve stopped by its context: exit %d, want 0\n%s", o.code, o.stderr)
	}
	for _, goForm := range []string{"720h0m0s", "1m0s"} {
		if strings.Contains(o.stderr, goForm) {
			t.Errorf("serve --audit-retention 30d --shutdown-timeout 1m logs %s (Go's form; want 30d and 1m):\n%s", goForm, o.stderr)
		}
	}
}
