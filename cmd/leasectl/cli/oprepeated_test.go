package cli

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// --op given twice on audit and audit export filters by both, as watch's
// --op does and as "--op acquire,revoke" does; the first one is not
// dropped without a word (or the repetition is refused, exit 2). Before,
// "audit --op acquire --op revoke" printed the revoke records alone.
func TestRepeatedOpFlagKeepsEveryOp(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLI(t, e, "acquire", "k", "-n", "ops", "--owner", "o", "-o", "token")
	wantCode(t, o, ExitOK)
	wantCode(t, runCLI(t, e, "revoke", "k", "-n", "ops", "--reason", "test"), ExitOK)

	opsOf := func(args []string, o outcome) []string {
		t.Helper()
		var ops []string
		if args[1] == "export" {
			sc := bufio.NewScanner(strings.NewReader(o.stdout))
			for sc.Scan() {
				var rec map[string]any
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("%s: line %q: %v", strings.Join(args, " "), sc.Text(), err)
				}
				ops = append(ops, rec["op"].(string))
			}
		} else {
			for _, r := range o.json(t)["records"].([]any) {
				ops = append(ops, r.(map[string]any)["op"].(string))
			}
		}
		slices.Sort(ops)
		return ops
	}
	for _, args := range [][]string{
		{"audit", "-n", "ops", "--op", "acquire", "--op", "revoke", "-o", "json"},
		{"audit", "export", "-n", "ops", "--op", "acquire", "--op", "revoke"},
	} {
		o := runCLI(t, e, args...)
		if o.code == ExitUsage {
			continue // refused: not silently narrowed
		}
		wantCode(t, o, ExitOK)
		if got := opsOf(args, o); !slices.Equal(got, []string{"acquire", "revoke"}) {
			t.Errorf("%s: records of ops %v, want acquire and revoke (or the repeated --op refused, exit 2)",
				strings.Join(args, " "), got)
		}
	}
}
