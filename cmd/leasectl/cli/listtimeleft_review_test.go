package cli

import (
	"strings"
	"testing"
)

// list's table writes TIME LEFT in the one duration grammar, as
// durations.Format writes it (7d, 6d23h59m59s), not Go's 168h0m0s or
// 167h59m59s (contract v3).
func TestReviewListTimeLeftInTheGrammar(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w", "--ttl", "7d"), 0)
	o := runCLI(t, e, "list")
	wantCode(t, o, 0)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("list: %d lines, want a header and one lease\n%s", len(lines), o.stdout)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	col := -1
	for i := 0; i+1 < len(head); i++ {
		if head[i] == "TIME" && head[i+1] == "LEFT" {
			col = i - 1 // HELD FOR is two header words, one cell
		}
	}
	if col < 0 || col >= len(row) {
		t.Fatalf("no TIME LEFT column in\n%s", o.stdout)
	}
	if left := row[col]; !strings.HasPrefix(left, "7d") && !strings.HasPrefix(left, "6d23h") {
		t.Errorf("list: TIME LEFT of a 7d lease is %q, want 7d or 6d23h59m... (the duration grammar)\n%s", left, o.stdout)
	}
}
