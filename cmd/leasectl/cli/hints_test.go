package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// The usual mistakes are answered with what to type instead.
func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	cases := []struct {
		args []string
		want []string // each in stderr
	}{
		{[]string{"acquire", "k", "--ttl", "5"}, []string{"5s"}},
		{[]string{"acquire", "k", "--ttl", "soon"}, []string{"30s"}},
		{[]string{"acquire", "k", "--timeout", "10"}, []string{"10s"}},
		{[]string{"audit", "--follow", "--interval", "2"}, []string{"2s"}},
		{[]string{"get", "k", "--dsn", "leasestore.db"}, []string{"sqlite:leasestore.db"}},
		{[]string{"get", "k", "--dsn", "/var/lib/leases.sqlite"}, []string{"sqlite:/var/lib/leases.sqlite"}},
		{[]string{"get", "k", "--dsn", "mysql://root@db/x"}, []string{"postgres://", "sqlite:"}},
	}
	for _, tc := range cases {
		o := runCLI(t, e, tc.args...)
		wantCode(t, o, ExitUsage)
		for _, w := range tc.want {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, o.stderr)
			}
		}
	}
	// Days are a unit: 2d is 48h; past the limit, 7d, is said as such (in days, as typed).
	ok := runCLI(t, e, "acquire", "days", "--ttl", "2d", "-o", "json")
	wantCode(t, ok, ExitOK)
	long := runCLI(t, e, "acquire", "k", "--ttl", "100d")
	wantCode(t, long, ExitUsage)
	if !strings.Contains(long.stderr+long.stdout, "100d is outside 1ms to 7d") {
		t.Errorf("--ttl 100d: the answer should name the limit:\n%s%s", long.stdout, long.stderr)
	}
}

// not_owner names the lease's owner and token beside what was asked.
func TestNotOwnerSaysWhoHoldsIt(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	tok := token(t, runCLI(t, e, "acquire", "k", "--owner", "alice", "-o", "json").json(t))
	o := runCLI(t, e, "renew", "k", "--owner", "bob", "--token", itoa(tok))
	wantCode(t, o, ExitRefused)
	for _, w := range []string{"not_owner", "alice", "bob", itoa(tok)} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("renew by the wrong owner: output lacks %q:\n%s", w, o.stdout)
		}
	}
	o = runCLI(t, e, "release", "k", "--owner", "alice", "--token", itoa(tok+5))
	wantCode(t, o, ExitRefused)
	if !strings.Contains(o.stdout, itoa(tok+5)) || !strings.Contains(o.stdout, "never issued") {
		t.Errorf("release with a token never issued:\n%s", o.stdout)
	}
}

// A key=value PostgreSQL DSN (libpq's form) is accepted, its password masked.
func TestKeyValueDSN(t *testing.T) {
	t.Parallel()
	tg, err := parseDSN("host=127.0.0.1 port=5432 user=root password=hunter22 dbname=test")
	if err != nil {
		t.Fatalf("key=value DSN refused: %v", err)
	}
	if tg.dialect != "postgres" || strings.Contains(tg.shown, "hunter22") {
		t.Fatalf("key=value DSN parsed as %+v", tg)
	}
	if _, err := parseDSN(filepath.Join("x", "y.db")); err == nil || !strings.Contains(err.Error(), "sqlite:") {
		t.Fatalf("a bare path: %v", err)
	}
}

// A KEY whose namespace part (before the first '/') or name part (after
// it) is empty is refused with the KEY to write instead. It said only
// "namespace: must not be empty" (leasectl get /etc) or "key: must not
// be empty" (leasectl get jobs/), naming neither the part of KEY that was
// read so nor the way to write the name meant.
func TestEmptyKeyPartSaysWhatToWrite(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, c := range []struct {
		key  string
		want []string // each in stderr
	}{
		{"/lead", []string{`"/lead"`, "default//lead", "-n"}},
		{"trail/", []string{`"trail/"`, "default/trail/"}},
	} {
		o := runCLI(t, e, "acquire", c.key, "--owner", "w")
		wantCode(t, o, ExitUsage)
		for _, w := range c.want {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("acquire %s: stderr lacks %q:\n%s", c.key, w, o.stderr)
			}
		}
	}
}
