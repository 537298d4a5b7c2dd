package cli

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// nextHint returns the "more: " line of out split into arguments (the
// command name dropped), and the rest of that line after the command.
func nextHint(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(line, "more: "); ok {
			cmdline, _, _ := strings.Cut(h, "  #")
			f := strings.Fields(cmdline)
			if len(f) < 2 || f[0] != "leasectl" {
				t.Fatalf("hint %q is not a leasectl command line", h)
			}
			return f[1:]
		}
	}
	t.Fatalf("no next-page hint in:\n%s", out)
	return nil
}

// A paging hint can be pasted: a --dsn that holds a password is not
// repeated with the password masked (which would fail to authenticate);
// the hint says to add it back.
func TestNextPageHintWithAPassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.MigratedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pw-s3cret") // trust auth ignores it
	dsn := u.String()
	for _, k := range []string{"a", "b", "c"} {
		wantCode(t, runCLI(t, env{}, "acquire", k, "--dsn", dsn), 0)
	}
	first := runCLI(t, env{}, "list", "--limit", "2", "--dsn", dsn)
	wantCode(t, first, 0)
	if strings.Contains(first.stdout, "xxxxx") || strings.Contains(first.stdout, "pw-s3cret") {
		t.Fatalf("the hint repeats the DSN with its password, masked or not:\n%s", first.stdout)
	}
	if !strings.Contains(first.stdout, "--dsn") || !strings.Contains(first.stdout, "password") {
		t.Fatalf("the hint should say to add --dsn back, as it holds a password:\n%s", first.stdout)
	}
	args := append(nextHint(t, first.stdout), "--dsn", dsn)
	next := runCLI(t, env{}, args...)
	wantCode(t, next, 0)
	if !strings.Contains(next.stdout, " c ") || strings.Contains(next.stdout, " a ") {
		t.Fatalf("the pasted hint %v printed:\n%s", args, next.stdout)
	}

	// From the environment, the hint needs nothing added.
	e := env{EnvDSN: dsn}
	first = runCLI(t, e, "list", "--limit", "2")
	if strings.Contains(first.stdout, "--dsn") {
		t.Fatalf("the hint names --dsn though it came from the environment:\n%s", first.stdout)
	}
	wantCode(t, runCLI(t, e, nextHint(t, first.stdout)...), 0)
}

// The next page of audit --since DURATION, pasted later, still holds the
// records the first page's --since selected: a duration back from now is
// read once, and the hint carries the time it meant.
func TestAuditNextPageHintKeepsTheSinceTime(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	const window = 5 * time.Second
	start := time.Now()
	for _, k := range []string{"a", "b"} {
		wantCode(t, runCLI(t, e, "acquire", k, "--owner", "w"), 0)
	}
	first := runCLI(t, e, "audit", "--since", "5s", "--limit", "1")
	wantCode(t, first, 0)
	if took := time.Since(start); took > window*4/5 {
		// The first page may have left a out of its window: nothing to
		// show about the hint (a loaded machine, not a defect).
		t.Skipf("the acquires and the first page took %v of the %v window", took, window)
	}
	if !strings.Contains(first.stdout, "  b  ") {
		t.Fatalf("first page of audit --since 5s --limit 1:\n%s", first.stdout)
	}
	args := nextHint(t, first.stdout)
	time.Sleep(time.Until(start.Add(window + 500*time.Millisecond))) // the records are now older than the window
	next := runCLI(t, e, args...)
	wantCode(t, next, 0)
	if !strings.Contains(next.stdout, "  a  ") {
		t.Fatalf("the hint %v, run after the window passed, printed:\n%s\nwant the record of a, which the first page's --since selected", args, next.stdout)
	}
}
