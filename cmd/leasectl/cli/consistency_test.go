package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// One rule for table mode: the store's answer (success or refusal) goes to
// stdout; what is not an answer (bad input, a store that could not answer)
// goes to stderr. JSON mode prints its one object on stdout whatever
// happened.
func TestResultsOnStdoutDiagnosticsOnStderr(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w1"), 0)
	answers := [][]string{
		{"acquire", "k", "--owner", "w2"}, // conflict
		{"get", "free"},                   // not_found
		{"renew", "k", "--owner", "w1", "--token", "9"},
	}
	for _, args := range answers {
		o := runCLI(t, e, args...)
		if o.code == 0 || o.stdout == "" || strings.Contains(o.stderr, "leasectl:") {
			t.Errorf("%v: a refusal is the store's answer, want it on stdout\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
	}
	diagnostics := [][]string{
		{"list", "--limit", "5000"},
		{"audit", "--limit", "5000"},
		{"acquire", "k", "--ttl", "0s"},
		{"get", "k", "--dsn", "sqlite:" + t.TempDir()}, // a directory: the store cannot open
	}
	for _, args := range diagnostics {
		o := runCLI(t, e, args...)
		if o.code == 0 || o.stdout != "" || !strings.HasPrefix(o.stderr, "leasectl: ") {
			t.Errorf("%v: not an answer from the store, want it on stderr only\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
		if j := runCLI(t, e, append(args, "-o", "json")...); j.json(t)["status"] == "" {
			t.Errorf("%v -o json: %s", args, j.stdout)
		}
	}
}

// Table output reads as sentences: no stuttered status, no request id on
// reads, no countdown on a lease that ended.
func TestTableWording(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "k", "--owner", "w1")
	wantCode(t, acq, 0)
	if strings.HasPrefix(acq.stdout, "acquired: acquired") {
		t.Errorf("acquire stutters:\n%s", acq.stdout)
	}
	if !strings.HasPrefix(acq.stdout, "acquired ") || !strings.Contains(acq.stdout, "request id") {
		t.Errorf("acquire table output:\n%s", acq.stdout)
	}
	get := runCLI(t, e, "get", "k")
	wantCode(t, get, 0)
	if strings.Contains(get.stdout, "request id") {
		t.Errorf("get prints a request id nobody asked for:\n%s", get.stdout)
	}
	rel := runCLI(t, e, "release", "k", "--owner", "w1", "--token", "1")
	wantCode(t, rel, 0)
	if regexp.MustCompile(`expires.*\(in `).MatchString(rel.stdout) {
		t.Errorf("release shows a countdown for a lease that ended:\n%s", rel.stdout)
	}
}

// JSON times have a fixed six fraction digits, so they sort as strings.
func TestJSONTimesFixedWidth(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	m := runCLI(t, e, "acquire", "k", "-o", "json").json(t)
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	l := lease(t, m)
	for _, k := range []string{"acquired_at", "renewed_at", "expires_at"} {
		if !re.MatchString(l[k].(string)) {
			t.Errorf("%s = %q, want six fraction digits", k, l[k])
		}
	}
	recs := runCLI(t, e, "audit", "-o", "json").json(t)["records"].([]any)
	if at := recs[0].(map[string]any)["at"].(string); !re.MatchString(at) {
		t.Errorf("audit at = %q, want six fraction digits", at)
	}
}

func TestTimeJSONKeepsTrailingZeros(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 120000*1000, time.FixedZone("x", 3600))
	if got, want := timeJSON(at), "2026-12-01T09:00:00.120000Z"; got != want {
		t.Fatalf("timeJSON = %q, want %q", got, want)
	}
}
