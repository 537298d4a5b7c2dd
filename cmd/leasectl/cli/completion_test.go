package cli

import (
	"strings"
	"testing"
)

// An unknown shell is a usage error, not help with exit 0.
func TestCompletionUnknownShell(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "completion", "tcsh")
	wantCode(t, o, ExitUsage)
	if !strings.Contains(o.stderr, "tcsh") || !strings.Contains(o.stderr, "bash") {
		t.Errorf("completion tcsh: stderr %q should name the shells leasectl completes", o.stderr)
	}
	wantCode(t, runCLI(t, env{}, "completion", "bash"), ExitOK)
}

// Flag values with a fixed set are completed.
func TestFlagValueCompletion(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"get k -o ":          {"table", "json", "token"},
		"get k --log-level ": {"debug", "info", "warn", "error"},
		"bench --op ":        {"acquire-release", "renew", "mixed"},
		"audit --order ":     {"newest", "oldest"},
		"audit --op ":        {"acquire", "renew", "release", "revoke", "prune"},
		"audit export --op ": {"acquire", "renew", "release", "revoke", "prune"},
	}
	for line, want := range cases {
		args := append([]string{"__complete"}, strings.Fields(line)...)
		args = append(args, "")
		o := runCLI(t, env{}, args...)
		for _, w := range want {
			if !strings.Contains(o.stdout, w+"\n") && !strings.Contains(o.stdout, w+"\t") {
				t.Errorf("completing %q: %q missing from\n%s", line, w, o.stdout)
			}
		}
	}
}

// audit --op completes a comma-separated list: the ops not given yet.
func TestAuditOpCompletion(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "__complete", "audit", "--op", "acquire,re")
	for _, w := range []string{"acquire,renew\n", "acquire,release\n", "acquire,revoke\n", "acquire,prune\n"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("completing --op acquire,re: %q missing from\n%s", w, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "acquire,acquire") {
		t.Errorf("completing --op acquire,re offers acquire again:\n%s", o.stdout)
	}
}
