package cli

import (
	"strings"
	"testing"
)

// TestEmptyKeyFilterIsRefused: an empty --key (audit --key "$KEY" with KEY
// unset) is refused as get "" and watch "" refuse it (exit 2, "key: must
// not be empty"), as filterKeyArg says of a key without a name. It was
// read as no filter at all: audit printed, and audit export wrote, every
// record of the namespace, exit 0.
func TestEmptyKeyFilterIsRefused(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "a", "--owner", "w"), ExitOK)
	wantCode(t, runCLI(t, e, "get", "", "-o", "json"), ExitUsage)
	for _, args := range [][]string{
		{"audit", "--key", "", "--since", "1h", "-o", "json"},
		{"audit", "--key=", "--since", "1h", "-o", "json"},
		{"audit", "export", "--key", ""},
	} {
		o := runCLI(t, e, args...)
		if o.code != ExitUsage || strings.Contains(o.stdout, `"key":"a"`) {
			t.Errorf("leasectl %q: exit %d, stdout %q; want exit %d (an empty key, as get \"\" refuses it), no record of a",
				args, o.code, strings.TrimSpace(o.stdout), ExitUsage)
		}
	}
}
