package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
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

// serve --help names every route the served API has (the paths of
// httpapi's OpenAPI description, a {param} written as "...").
func TestServeHelpNamesEveryRoute(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "serve", "--help")
	wantCode(t, o, ExitOK)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(o.stdout), " ")
	for p := range spec.Paths {
		short := p
		if i := strings.Index(p, "/{"); i >= 0 {
			short = p[:i] + "/..."
		}
		if !strings.Contains(help, short) {
			t.Errorf("serve --help does not name the route %s (as %s)", p, short)
		}
	}
}

// run --help names every code run exits with before CMD starts, as
// acquire does: 3 held, 5 no answer, 7 a served store refused the token,
// 130 interrupted; and CMD's own: 126, 127, 128+N; 6 the lease was lost.
func TestRunHelpNamesItsExitCodes(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "run", "--help")
	wantCode(t, o, ExitOK)
	help := strings.Join(strings.Fields(o.stdout), " ")
	for _, want := range []string{"3 when the key is held", "5 when the store cannot answer", "7 when a served store refuses",
		"130 when interrupted", "127 (not found) or 126", "128 plus the signal's number", "run exits 6"} {
		if !strings.Contains(help, want) {
			t.Errorf("run --help does not say %q", want)
		}
	}
}
