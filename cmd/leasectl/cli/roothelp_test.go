package cli

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The root help is what an operator reads first: it names every DSN form
// openTarget accepts (the --dsn flag's line too) and every exit code
// leasectl exits with.
func TestRootHelpNamesEveryDSNFormAndExitCode(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "--help")
	wantCode(t, o, ExitOK)
	for _, form := range []string{"postgres://", "sqlite:PATH", "http://HOST:PORT", "https://", "etcd://", "etcds://", "host=HOST"} {
		if !strings.Contains(o.stdout, form) {
			t.Errorf("root --help does not name the DSN form %q:\n%s", form, o.stdout)
		}
	}
	dsnLine := regexp.MustCompile(`(?m)^\s+--dsn string .*$`).FindString(o.stdout)
	if !strings.Contains(dsnLine, "etcd://") {
		t.Errorf("the --dsn flag's help does not name etcd://: %q", dsnLine)
	}
	_, codes, _ := strings.Cut(o.stdout, "Exit codes:")
	codes, _, _ = strings.Cut(codes, "\n\n")
	for _, c := range []int{ExitOK, ExitError, ExitUsage, ExitConflict, ExitRefused, ExitUnavailable, ExitLost,
		ExitAuth, ExitInterrupted, ExitStdoutClosed} {
		if !regexp.MustCompile(`(^|[\s;])` + strconv.Itoa(c) + ` `).MatchString(codes) {
			t.Errorf("root --help's exit codes do not name %d:%s", c, codes)
		}
	}
}
