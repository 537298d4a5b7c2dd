package cli

import (
	"strconv"
	"strings"
	"testing"
)

// -o token prints only the token of the lease the caller holds: never the
// holder's token on conflict, never anything on stdout when it fails.
func TestOutputToken(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "report", "--owner", "w1", "-o", "token")
	wantCode(t, acq, ExitOK)
	tok, err := strconv.ParseInt(strings.TrimSuffix(acq.stdout, "\n"), 10, 64)
	if err != nil || !strings.HasSuffix(acq.stdout, "\n") || strings.Count(acq.stdout, "\n") != 1 {
		t.Fatalf("acquire -o token: stdout %q, want the token and a newline", acq.stdout)
	}

	conflict := runCLI(t, e, "acquire", "report", "--owner", "w2", "-o", "token")
	wantCode(t, conflict, ExitConflict)
	if conflict.stdout != "" {
		t.Fatalf("acquire -o token on conflict printed %q on stdout; want nothing", conflict.stdout)
	}
	if !strings.Contains(conflict.stderr, "conflict") || !strings.Contains(conflict.stderr, "w1") {
		t.Fatalf("acquire -o token on conflict: stderr %q should say who holds the key", conflict.stderr)
	}

	renew := runCLI(t, e, "renew", "report", "--owner", "w1", "--token", itoa(tok), "-o", "token")
	wantCode(t, renew, ExitOK)
	if renew.stdout != itoa(tok)+"\n" {
		t.Fatalf("renew -o token: stdout %q, want %q", renew.stdout, itoa(tok)+"\n")
	}
	get := runCLI(t, e, "get", "report", "-o", "token")
	wantCode(t, get, ExitOK)
	if get.stdout != itoa(tok)+"\n" {
		t.Fatalf("get -o token: stdout %q, want %q", get.stdout, itoa(tok)+"\n")
	}
	stale := runCLI(t, e, "renew", "report", "--owner", "w1", "--token", itoa(tok-1), "-o", "token")
	if stale.code == ExitOK || stale.stdout != "" {
		t.Fatalf("renew -o token with a wrong token: exit %d, stdout %q; want a refusal and nothing on stdout", stale.code, stale.stdout)
	}
	missing := runCLI(t, e, "get", "nothing-here", "-o", "token")
	wantCode(t, missing, ExitRefused)
	if missing.stdout != "" || !strings.Contains(missing.stderr, "not_found") {
		t.Fatalf("get -o token of a free key: stdout %q stderr %q", missing.stdout, missing.stderr)
	}
	// A usage error says so on stderr and prints nothing on stdout.
	bad := runCLI(t, e, "acquire", "report", "--ttl", "soon", "-o", "token")
	wantCode(t, bad, ExitUsage)
	if bad.stdout != "" {
		t.Fatalf("usage error with -o token printed %q on stdout", bad.stdout)
	}
}

// -o token is refused by commands that have no token to print.
func TestOutputTokenOnlyWhereThereIsOne(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, args := range [][]string{{"list"}, {"release", "k", "--token", "1"}, {"health"}, {"audit"}} {
		o := runCLI(t, e, append(args, "-o", "token")...)
		wantCode(t, o, ExitUsage)
		if o.stdout != "" || !strings.Contains(o.stderr, "token") {
			t.Errorf("%v -o token: stdout %q stderr %q; want a usage error naming the commands that take it", args, o.stdout, o.stderr)
		}
	}
}
