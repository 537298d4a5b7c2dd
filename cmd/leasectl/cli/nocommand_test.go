package cli

import (
	"strings"
	"testing"
)

// Global flags without a command are a usage error (exit 2) naming the
// fix, not the root help on stdout with exit 0, which a script reads as
// success (`leasectl -o json` parsing help text as JSON): in table mode
// on stderr, stdout empty; with -o json one failure object on stdout, as
// every usage error prints with -o json. leasectl alone still prints the
// help, exit 0.
func TestGlobalFlagsWithoutACommandAreAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-o", "json"}, {"--output=json"}, {"-o", "table"}, {"--dsn", "sqlite:unused.db"},
		{"--timeout", "3s"}, {"--log-level", "debug"}, {"--log-level", "warn", "-o", "json"},
	} {
		o := runCLI(t, env{}, args...)
		if o.code != ExitUsage {
			t.Errorf("leasectl %s: exit %d, want %d (usage)\nstdout: %.200s\nstderr: %s", strings.Join(args, " "), o.code, ExitUsage,
				o.stdout, o.stderr)
			continue
		}
		msg := o.stderr
		if strings.Contains(strings.Join(args, " "), "json") {
			m := o.json(t)
			if m["status"] != "invalid" {
				t.Errorf("leasectl %s: status %v, want invalid", strings.Join(args, " "), m["status"])
			}
			msg, _ = m["message"].(string)
		} else if o.stdout != "" {
			t.Errorf("leasectl %s: stdout %.200q, want nothing", strings.Join(args, " "), o.stdout)
		}
		if !strings.Contains(msg, "no command") || !strings.Contains(msg, "leasectl --help") {
			t.Errorf("leasectl %s: message %q: want it to say no command was given and name 'leasectl --help'",
				strings.Join(args, " "), msg)
		}
	}
	o := runCLI(t, env{})
	wantCode(t, o, ExitOK)
	if !strings.Contains(o.stdout, "Available Commands") {
		t.Errorf("leasectl alone: stdout %.200q, want the help", o.stdout)
	}
}
