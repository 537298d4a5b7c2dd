package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The HTTP API takes the CLI's duration grammar (docs/http-api.md,
// "Durations and times"; contract v3: one duration grammar for CLI and
// API alike), and a refusal quotes a limit the way users write it, as the
// API's own refusal of ttl 8d does ("8d is outside [1ms, 7d]") and the
// CLI's every flag does: never Go's "168h0m0s" or "1h0m0s", which no one
// wrote.
func TestAPIRefusalsQuoteDurationsAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "leases.db"), nil)
	for _, body := range []string{
		`{"namespace":"n","key":"k","owner":"o","ttl":"0s"}`,
		`{"namespace":"n","key":"k","owner":"o","ttl":"1000000"}`,
		`{"namespace":"n","key":"k","owner":"o","ttl":"30s","lock_delay":"2h"}`,
	} {
		msg, _ := call(t, "POST", s.url+"/v1/acquire", body).want(t, body, 400, "invalid")["message"].(string)
		if strings.Contains(msg, "h0m0s") {
			t.Errorf("POST /v1/acquire %s: refused with %q, which quotes a duration in Go's form, not as users write it (7d, 1h, 2h)", body, msg)
		}
	}
}

// docs/operator-guide.md's exit codes table names, in its row for 0, the
// statuses of every success, and its Output section says that commands
// outside the lease vocabulary answer healthy or ok. audit prune, a
// success (exit 0), must answer one of those statuses, or the table must
// name its own: a script that maps statuses to outcomes from the table
// meets a status it was never told of.
func TestExitZeroStatusesAreInTheExitCodesTable(t *testing.T) {
	t.Parallel()
	guide := repoFile(t, "docs/operator-guide.md")
	_, section, _ := strings.Cut(guide, "\n## Exit codes\n")
	var zero []string
	for _, line := range strings.Split(section, "\n") {
		if rest, ok := strings.CutPrefix(line, "| 0 | "); ok {
			for _, s := range strings.Split(strings.TrimSuffix(rest, " |"), ",") {
				zero = append(zero, strings.TrimSpace(s))
			}
		}
	}
	if len(zero) == 0 {
		t.Fatal("docs/operator-guide.md's exit codes table has no row for 0")
	}
	c := leasectl{dir: t.TempDir(), dsn: "sqlite:leases.db"}
	c.runJSON(t, 0, "acquire", "k")
	m := c.runJSON(t, 0, "audit", "prune", "--before", "0s", "--yes")
	if !slices.Contains(zero, m["status"].(string)) {
		t.Errorf("leasectl audit prune exited 0 with status %q, which docs/operator-guide.md's exit codes table does not list for 0 (%s)",
			m["status"], strings.Join(zero, ", "))
	}
	// serve -o json answers "serving" once it listens (startServe checks
	// it) and, stopped, exits 0.
	s := startServe(t, c.dir, "sqlite:"+filepath.Join(c.dir, "leases.db"), nil)
	if code := s.stop(t); code != 0 {
		t.Errorf("leasectl serve exited %d when stopped, not 0\nstderr: %s", code, s.stderr)
	}
	if !slices.Contains(zero, "serving") {
		t.Errorf("leasectl serve -o json answers status \"serving\" and exits 0, which docs/operator-guide.md's exit codes table does not list for 0 (%s)",
			strings.Join(zero, ", "))
	}
}

// README.md: without LEASESTORE_TEST_POSTGRES_DSN (and without Docker) the
// PostgreSQL tests are skipped, "and `make test` says so before it starts".
// make test's first commands are lint's (gofmt, go vet, the other systems'
// builds, staticcheck: minutes on a fresh machine); the note must come
// before them, not after.
func TestMakeTestSaysItSkipsPostgresBeforeItStarts(t *testing.T) {
	t.Parallel()
	if !strings.Contains(repoFile(t, "README.md"), "`make test` says so before it starts") {
		t.Skip("README.md no longer says when make test tells of the skipped PostgreSQL tests")
	}
	cmd := exec.Command("make", "-C", filepath.Join("..", ".."), "-n", "test")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASESTORE_TEST_POSTGRES_DSN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	note := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "LEASESTORE_TEST_POSTGRES_DSN is not set") })
	first := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "gofmt") || strings.Contains(l, "go vet") })
	if note < 0 || first < 0 {
		t.Fatalf("make -n test shows no note (line %d) or no lint command (line %d):\n%s", note, first, out)
	}
	if note > first {
		t.Errorf("make test tells of the skipped PostgreSQL tests at its command %d, after lint's %q (command %d): not before it starts", note+1, lines[first], first+1)
	}
}

// docs/operator-guide.md (Output): "With -o json every command prints
// exactly one JSON object on stdout whatever happened", but for watch,
// audit --follow, audit export and bench, which it names; DESIGN.md's
// leasectl contract says the same. run is not among the exceptions, yet a
// run whose CMD printed nothing and succeeded prints nothing on stdout.
func TestRunJSONPrintsOneObject(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: "sqlite:leases.db"}
	r := c.run(t, "run", "job", "-o", "json", "--", "true")
	if r.code != 0 {
		t.Fatalf("run of true: exit %d\n%s", r.code, r)
	}
	r.obj(t)
}
