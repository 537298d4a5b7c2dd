package cli

import (
	"testing"
)

// The forms an operator types first are accepted end to end.
func TestAuditSinceForms(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
	for _, since := range []string{"1d", "2020-01-01", "0s"} {
		o := runCLI(t, e, "audit", "--since", since, "-o", "json")
		wantCode(t, o, ExitOK)
		n := len(o.json(t)["records"].([]any))
		if (since == "0s") != (n == 0) {
			t.Errorf("audit --since %s: %d records", since, n)
		}
	}
}
