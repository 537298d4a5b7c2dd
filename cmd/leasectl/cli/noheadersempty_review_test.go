package cli

import (
	"testing"
)

// --no-headers (list, audit) prints only data lines on stdout
// (docs/operator-guide.md): with no lease or record to show, stdout is
// empty, so that `leasectl list --no-headers | wc -l` counts leases. It
// printed "no leases in namespace NS" (and "no audit records") there, a
// line a script counts as a lease.
func TestReviewNoHeadersPrintsNothingWhenEmpty(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "-n", "other", "--owner", "w"), 0)
	for _, args := range [][]string{
		{"list", "--no-headers"},
		{"list", "-n", "empty", "--no-headers"},
		{"audit", "--no-headers"},
		{"audit", "-n", "empty", "--no-headers"},
	} {
		o := runCLI(t, e, args...)
		wantCode(t, o, 0)
		if o.stdout != "" {
			t.Errorf("leasectl %v with nothing to show: stdout %q, want only data lines (none)", args, o.stdout)
		}
	}
}
