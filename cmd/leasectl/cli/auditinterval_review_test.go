package cli

import (
	"strings"
	"testing"
)

// audit --interval is the poll interval of --follow; without --follow it
// can do nothing, so it is refused (exit 2) as acquire refuses
// --wait-timeout without --wait ("--wait-timeout: only with --wait"),
// rather than read one page and exit 0 as if the user had not asked to
// follow. It was accepted silently.
func TestReviewAuditIntervalWithoutFollowIsRefused(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLI(t, e, "acquire", "k", "--owner", "w", "--wait-timeout", "5s")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "only with --wait") {
		t.Fatalf("acquire --wait-timeout without --wait: exit %d, stderr %q (the reference: refused)", o.code, o.stderr)
	}
	o = runCLI(t, e, "audit", "--interval", "5s")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "--follow") {
		t.Errorf("audit --interval 5s without --follow: exit %d, stdout %q, stderr %q; want %d naming --follow",
			o.code, o.stdout, o.stderr, ExitUsage)
	}
}
