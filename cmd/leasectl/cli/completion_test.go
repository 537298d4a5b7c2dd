package cli

import (
	"strings"
	"testing"
)

// An unknown shell is a usage error, not help with exit 0.
func TestCompletionUnknownShell(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "completion", "tcsh")
	wantCode(t, o, ExitUsage)
	if !strings.Contains(o.stderr, "tcsh") || !strings.Contains(o.stderr, "bash") {
		t.Errorf("completion tcsh: stderr %q should name the shells leasectl completes", o.stderr)
	}
	wantCode(t, runCLI(t, env{}, "completion", "bash"), ExitOK)
}

// Flag values with a fixed set are completed.
func TestFlagValueCompletion(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"get k -o ":          {"table", "json", "token"},
		"get k --log-level ": {"debug", "info", "warn", "error"},
		"bench --op ":        {"acquire-release", "renew", "mixed"},
		"audit --order ":     {"newest", "oldest"},
		"audit --op ":        {"acquire", "renew", "release", "revoke", "prune"},
		"audit export --op ": {"acquire", "renew", "release", "revoke", "prune"},
	}
	for line, want := range cases {
		args := append([]string{"__complete"}, strings.Fields(line)...)
		args = append(args, "")
		o := runCLI(t, env{}, args...)
		for _, w := range want {
			if !strings.Contains(o.stdout, w+"\n") && !strings.Contains(o.stdout, w+"\t") {
				t.Errorf("completing %q: %q missing from\n%s", line, w, o.stdout)
			}
		}
	}
}

// audit --op completes a comma-separated list: the ops not given yet.
func TestAuditOpCompletion(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "__complete", "audit", "--op", "acquire,re")
	for _, w := range []string{"acquire,renew\n", "acquire,release\n", "acquire,revoke\n", "acquire,prune\n"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("completing --op acquire,re: %q missing from\n%s", w, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "acquire,acquire") {
		t.Errorf("completing --op acquire,re offers acquire again:\n%s", o.stdout)
	}
}

// completions returns the candidates and the directive line of a
// __complete answer.
func completions(o outcome) (cands []string, directive string) {
	for _, line := range strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n") {
		if strings.HasPrefix(line, ":") {
			return cands, line
		}
		cands = append(cands, line)
	}
	return cands, ""
}

// What KEY completes to reads back as the key it came from (contract v3:
// what any surface prints as a key, every surface accepts back): without
// -n, a name holding "/" in the default namespace completes as
// default/NAME (bare, it would read as another namespace), and the
// namespaces holding live leases complete as NS/ (escaped), with no space
// after them. Completion offered a/b, which get read as the name b in a.
func TestCompleteKeysReadBack(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, args := range [][]string{{"a/b", "-n", "default"}, {"plain"}, {"x/y", "-n", "ns1"}, {"k", "-n", "p/q"}} {
		wantCode(t, runCLI(t, e, append([]string{"acquire", "--owner", "w"}, args...)...), ExitOK)
	}
	has := func(cands []string, want string) bool {
		for _, c := range cands {
			if c == want {
				return true
			}
		}
		return false
	}
	cands, dir := completions(runCLI(t, e, "__complete", "get", ""))
	for _, want := range []string{"default/a/b", "plain", "default/", "ns1/", "p%2Fq/"} {
		if !has(cands, want) {
			t.Errorf(`complete get "": %q missing from %q`, want, cands)
		}
	}
	if has(cands, "a/b") {
		t.Errorf(`complete get "": offers a/b, which reads back as the name b in namespace a: %q`, cands)
	}
	if dir != ":6" {
		t.Errorf(`complete get "": directive %s, want :6 (no space after NS/, no files)`, dir)
	}
	// Every whole key offered reads back as a live lease.
	for _, c := range cands {
		if !strings.HasSuffix(c, "/") {
			if o := runCLI(t, e, "get", c); o.code != ExitOK {
				t.Errorf("complete offered %q, but get %s exits %d: %s%s", c, c, o.code, o.stdout, o.stderr)
			}
		}
	}
	for toComplete, want := range map[string][]string{
		"ns":       {"ns1/"},
		"ns1/":     {"ns1/x/y"},
		"p":        {"p%2Fq/", "plain"},
		"p%2Fq/":   {"p%2Fq/k"},
		"default/": {"default/a/b", "default/plain"},
	} {
		got, _ := completions(runCLI(t, e, "__complete", "get", toComplete))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("complete get %q: %q, want %q", toComplete, got, want)
		}
		for _, c := range got {
			if !strings.HasSuffix(c, "/") {
				wantCode(t, runCLI(t, e, "get", c), ExitOK)
			}
		}
	}
	// With -n, KEY is the name as written.
	if got, dir := completions(runCLI(t, e, "__complete", "get", "-n", "default", "")); strings.Join(got, " ") != "a/b plain" || dir != ":4" {
		t.Errorf(`complete get -n default "": %q %s, want [a/b plain] :4`, got, dir)
	}
}
