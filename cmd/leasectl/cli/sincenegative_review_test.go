package cli

import (
	"strings"
	"testing"
)

// A negative --since is refused, and the message quotes the duration in
// the one duration grammar the user typed (-1h), never Go's -1h0m0s
// (DESIGN.md, contract v3: one duration grammar for CLI and API alike).
func TestReviewNegativeSinceQuotesTheGrammar(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"audit", "--since", "-1h"},
		{"audit", "export", "--since", "-1h"},
		{"watch", "--since", "-1h"},
		{"audit", "prune", "--before", "-1h", "--yes"},
	} {
		o := runCLI(t, sqliteEnv(t), args...)
		if o.code != ExitUsage {
			t.Errorf("leasectl %v: exit %d, want %d\nstderr: %s", args, o.code, ExitUsage, o.stderr)
		}
		if strings.Contains(o.stderr, "1h0m0s") || !strings.Contains(o.stderr, "-1h") {
			t.Errorf("leasectl %v: stderr %q quotes the duration in Go's form; want -1h as typed", args, strings.TrimSpace(o.stderr))
		}
	}
}
