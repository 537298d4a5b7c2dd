package cli

import (
	"strings"
	"testing"
	"time"
)

// TestKeyFilterOfOnlyANamespaceIsRefused: a KEY of only a namespace
// ("scan/", an empty name) is refused as get refuses it (exit 2, "key:
// must not be empty"), also where a key filters the audit trail (audit
// --key, audit export --key, watch KEY). There it was read as no filter at
// all: audit --key scan/ printed every record of namespace scan, and watch
// scan/ followed the whole namespace, as if the name had not been given.
func TestKeyFilterOfOnlyANamespaceIsRefused(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "scan/a", "--owner", "w"), ExitOK)
	wantCode(t, runCLI(t, e, "acquire", "scan/b", "--owner", "w"), ExitOK)
	wantCode(t, runCLI(t, e, "get", "scan/", "-o", "json"), ExitUsage)
	for _, args := range [][]string{
		{"audit", "--key", "scan/", "--since", "1h"},
		{"audit", "export", "--key", "scan/"},
		{"watch", "scan/", "--since", "1h"},
	} {
		o := runCLIFor(t, 2*time.Second, e, append(args, "-o", "json")...)
		if o.code != ExitUsage || strings.Contains(o.stdout, `"key":"a"`) {
			t.Errorf("leasectl %s -o json: exit %d, stdout %q; want exit %d (a key of only a namespace, as get scan/ refuses it), no record of scan/a",
				strings.Join(args, " "), o.code, strings.TrimSpace(o.stdout), ExitUsage)
		}
	}
}
