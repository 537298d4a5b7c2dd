package cli

import (
	"strings"
	"testing"
)

// TestDurationFlagsRefuseBlanks: a duration or time flag written with
// blanks around its value (--ttl " 30s", a quoting slip in a script) is
// refused as the grammar refuses it, exit 2 naming the value to write,
// before anything is written; it was read as if the blanks were not there.
func TestDurationFlagsRefuseBlanks(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, tc := range []struct {
		args []string
		fix  string
	}{
		{[]string{"acquire", "k1", "--owner", "w", "--ttl", " 30s"}, "30s"},
		{[]string{"--timeout", "5s ", "acquire", "k2", "--owner", "w"}, "5s"},
		{[]string{"acquire", "k3", "--owner", "w", "--wait", "--wait-timeout", " 0"}, "0"},
		{[]string{"acquire", "k4", "--owner", "w", "--lock-delay", "1s\t"}, "1s"},
		{[]string{"audit", "--since", " 1h"}, "1h"},
	} {
		o := runCLI(t, e, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, "blank") || !strings.Contains(o.stderr, `write "`+tc.fix+`"`) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d naming the blanks and the value to write (%q)",
				tc.args, o.code, o.stderr, ExitUsage, tc.fix)
		}
	}
	o := runCLI(t, e, "list", "-o", "json")
	wantCode(t, o, 0)
	if n := len(o.json(t)["leases"].([]any)); n != 0 {
		t.Errorf("refused commands acquired %d keys, want none:\n%s", n, o.stdout)
	}
}
