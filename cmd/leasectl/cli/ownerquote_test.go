package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestTablesQuoteOwnersAsRecordLinesDo: an owner holding a blank (or a
// quote) is quoted in list's table and in get's result as watch and audit
// --follow lines quote it (lineValue), so that its columns still read
// back; one without stays as written. list and get printed it bare:
// "worker 1" read as two columns.
func TestTablesQuoteOwnersAsRecordLinesDo(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, tc := range []struct{ key, owner, shown string }{
		{"k1", "worker 1", `"worker 1"`},
		{"k2", `say "hi"`, `"say \"hi\""`},
		{"k3", "w3", "w3"},
	} {
		if got := lineValue(tc.owner); got != tc.shown {
			t.Fatalf("watch and audit --follow lines show owner %q as %s, want %s", tc.owner, got, tc.shown)
		}
		wantCode(t, runCLI(t, e, "acquire", tc.key, "--owner", tc.owner), 0)
		list := runCLI(t, e, "list", "--no-headers")
		wantCode(t, list, 0)
		row := regexp.MustCompile(`(?m)^default\s+` + tc.key + `\s+(.*)$`).FindStringSubmatch(list.stdout)
		if row == nil || !strings.HasPrefix(row[1], tc.shown+" ") {
			t.Errorf("list: the row of %s is %q; want its owner column %s\n%s", tc.key, row, tc.shown, list.stdout)
		}
		get := runCLI(t, e, "get", tc.key)
		wantCode(t, get, 0)
		if !regexp.MustCompile(`(?m)^  owner\s+` + regexp.QuoteMeta(tc.shown) + `$`).MatchString(get.stdout) {
			t.Errorf("get %s: want the owner row to show %s\n%s", tc.key, tc.shown, get.stdout)
		}
	}
}
