package cli

import (
	"strings"
	"testing"
)

// `leasectl help TOPIC` with a topic that is no command is a usage error
// (exit 2, on stderr), as `leasectl TOPIC` and `leasectl completion tcsh`
// are: not help on stdout with exit 0, which a script takes for success.
func TestHelpUnknownTopicIsAUsageError(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "help", "bogus")
	if o.code != ExitUsage {
		first, _, _ := strings.Cut(o.stdout, "\n")
		t.Errorf("leasectl help bogus exited %d, want %d (usage); stdout begins %q", o.code, ExitUsage, first)
	}
	if strings.Contains(o.stdout, "bogus") || !strings.Contains(o.stderr, "bogus") {
		first, _, _ := strings.Cut(o.stdout, "\n")
		t.Errorf("leasectl help bogus: the refusal should be on stderr, naming the topic; stdout begins %q, stderr %q", first, o.stderr)
	}
	wantCode(t, runCLI(t, env{}, "bogus"), ExitUsage)
}
