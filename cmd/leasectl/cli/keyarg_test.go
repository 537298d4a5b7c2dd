package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// What leasectl prints as a key, leasectl accepts back: acquire with -n
// prints NS/NAME, and get, describe, renew, release and revoke given that
// text alone find the same lease. With -n, KEY is the name as written.
func TestPrintedKeysAreAccepted(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "scan/10.0.0.0-24", "-n", "billing", "--owner", "w", "-o", "json")
	wantCode(t, acq, ExitOK)
	l := acq.json(t)["lease"].(map[string]any)
	printed := l["namespace"].(string) + "/" + l["key"].(string)
	if printed != "billing/scan/10.0.0.0-24" {
		t.Fatalf("acquire printed the key %s", printed)
	}
	table := runCLI(t, e, "acquire", "scan/10.0.0.0-24", "-n", "billing", "--owner", "w")
	wantCode(t, table, ExitConflict)
	if !strings.Contains(table.stdout, printed) {
		t.Fatalf("the table does not show %s:\n%s", printed, table.stdout)
	}
	for _, args := range [][]string{
		{"get", printed},
		{"describe", printed},
		{"get", "scan/10.0.0.0-24", "-n", "billing"},
		{"renew", printed, "--owner", "w", "--token", "1"},
	} {
		o := runCLI(t, e, append(args, "-o", "json")...)
		wantCode(t, o, ExitOK)
		if got := o.json(t)["lease"].(map[string]any); got["namespace"] != "billing" || got["key"] != "scan/10.0.0.0-24" {
			t.Errorf("%v found %v", args, got)
		}
	}
	wantCode(t, runCLI(t, e, "get", printed, "-n", "billing"), ExitRefused) // with -n, KEY is the name
	wantCode(t, runCLI(t, e, "release", printed, "--owner", "w", "--token", "1"), ExitOK)
	wantCode(t, runCLI(t, e, "get", printed), ExitRefused)

	// The default namespace: a bare KEY, and its printed form default/KEY.
	wantCode(t, runCLI(t, e, "acquire", "nightly", "--owner", "w"), ExitOK)
	wantCode(t, runCLI(t, e, "get", "default/nightly"), ExitOK)
	wantCode(t, runCLI(t, e, "revoke", "default/nightly", "--reason", "test"), ExitOK)
}

// A fresh SQLite file is migrated on first use without a word at the
// default log level, and with one line (not one per migration) at debug.
func TestFreshSQLiteMigratesQuietly(t *testing.T) {
	t.Parallel()
	o := runCLI(t, sqliteEnv(t), "acquire", "k", "--owner", "w")
	wantCode(t, o, ExitOK)
	if strings.Contains(o.stderr, "migrated") {
		t.Errorf("a first use at the default log level logged its migrations:\n%s", o.stderr)
	}
	o = runCLI(t, sqliteEnv(t), "acquire", "k", "--owner", "w", "--log-level", "debug")
	wantCode(t, o, ExitOK)
	if n := strings.Count(o.stderr, "migrated SQLite store"); n != 1 {
		t.Errorf("a first use at debug logged %d migration lines, want 1:\n%s", n, o.stderr)
	}
}

// The root help shows its DSN forms as written: the password redactor,
// which guards what the store answers, leaves leasectl's own help alone.
func TestRootHelpIsNotRedacted(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "--help")
	wantCode(t, o, ExitOK)
	if !strings.Contains(o.stdout, "postgres://USER:PASSWORD@HOST:PORT/DB") || strings.Contains(o.stdout, "xxxxx") {
		t.Errorf("root --help:\n%s", o.stdout)
	}
}

// audit --key and audit export --key read the key as every KEY is read:
// NS/NAME without -n (audit's own example: --key scan/10.0.0.0-24), the
// name as written with -n.
func TestAuditKeyFilterAcceptsPrintedKeys(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "scan/10.0.0.0-24", "--owner", "w"), ExitOK) // namespace scan
	wantCode(t, runCLI(t, e, "acquire", "10.0.0.0-24", "-n", "other", "--owner", "w"), ExitOK)
	for _, args := range [][]string{
		{"audit", "--key", "scan/10.0.0.0-24"},
		{"audit", "--key", "10.0.0.0-24", "-n", "scan"},
	} {
		o := runCLI(t, e, append(args, "-o", "json", "--since", "1h")...)
		wantCode(t, o, ExitOK)
		recs := o.json(t)["records"].([]any)
		if len(recs) != 1 || recs[0].(map[string]any)["namespace"] != "scan" {
			t.Errorf("%v: %v, want the record of scan/10.0.0.0-24", args, recs)
		}
	}
	o := runCLI(t, e, "audit", "export", "--key", "scan/10.0.0.0-24")
	wantCode(t, o, ExitOK)
	if lines := strings.Split(strings.TrimSpace(o.stdout), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"namespace":"scan"`) {
		t.Errorf("audit export --key scan/10.0.0.0-24 printed:\n%s\nwant the record of scan/10.0.0.0-24", o.stdout)
	}
	// A bare name is a name in the default namespace, as every KEY is read,
	// also for export (it refused it: "a key filter needs a namespace").
	wantCode(t, runCLI(t, e, "acquire", "bare", "--owner", "w"), ExitOK)
	o = runCLI(t, e, "audit", "export", "--key", "bare")
	wantCode(t, o, ExitOK)
	if lines := strings.Split(strings.TrimSpace(o.stdout), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"namespace":"default"`) {
		t.Errorf("audit export --key bare printed:\n%s\nwant the record of default/bare", o.stdout)
	}
	// With -n, the key is the name as written.
	o = runCLI(t, e, "audit", "-n", "scan", "--key", "scan/10.0.0.0-24", "-o", "json")
	wantCode(t, o, ExitOK)
	if recs := o.json(t)["records"].([]any); len(recs) != 0 {
		t.Errorf("audit -n scan --key scan/10.0.0.0-24: %v, want none (no name scan/10.0.0.0-24 in scan)", recs)
	}
}

// printedKey returns the key a table result names on its first line
// ("acquired NS/NAME" or "conflict NS/NAME: ...").
func printedKey(t *testing.T, o outcome) string {
	t.Helper()
	first, _, _ := strings.Cut(o.stdout, "\n")
	f := strings.Fields(first)
	if len(f) < 2 {
		t.Fatalf("no key on the first line of:\n%s", o.stdout)
	}
	return strings.TrimSuffix(f[1], ":")
}

// Keys round-trip whatever their namespace holds: the namespace part of
// NS/NAME escapes '/' and '%' as the HTTP path does (%2F, %25), the name is
// verbatim after the first '/'. acquire k -n p/q and acquire q/k -n p are
// two leases and print two keys, and each printed key finds its own lease
// again as a KEY argument and as audit --key.
func TestKeysWithSlashOrPercentRoundTrip(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, c := range []struct{ ns, name, printed string }{
		{"p/q", "k", "p%2Fq/k"},
		{"p", "q/k", "p/q/k"},
		{"50%off", "x", "50%25off/x"},
		{"a/b%c", "d/e%2Ff/", "a%2Fb%25c/d/e%2Ff/"},
		{"plain", "10.0.0.0/24", "plain/10.0.0.0/24"},
	} {
		acq := runCLI(t, e, "acquire", c.name, "-n", c.ns, "--owner", "w")
		wantCode(t, acq, ExitOK)
		if got := printedKey(t, acq); got != c.printed {
			t.Errorf("acquire %q -n %q printed the key %q, want %q", c.name, c.ns, got, c.printed)
			continue
		}
		tok := ""
		if o := runCLI(t, e, "get", c.name, "-n", c.ns, "-o", "token"); o.code == ExitOK {
			tok = strings.TrimSpace(o.stdout)
		}
		for _, args := range [][]string{
			{"get", c.printed},
			{"describe", c.printed},
			{"renew", c.printed, "--owner", "w", "--token", tok},
		} {
			o := runCLI(t, e, append(args, "-o", "json")...)
			if o.code != ExitOK {
				t.Errorf("%v: exit %d: %s%s", args, o.code, o.stdout, o.stderr)
				continue
			}
			if got := lease(t, o.json(t)); got["namespace"] != c.ns || got["key"] != c.name {
				t.Errorf("%v found %v/%v, want namespace %q name %q", args, got["namespace"], got["key"], c.ns, c.name)
			}
		}
		o := runCLI(t, e, "audit", "--key", c.printed, "--since", "1h", "-o", "json")
		wantCode(t, o, ExitOK)
		for _, r := range o.json(t)["records"].([]any) {
			if r := r.(map[string]any); r["namespace"] != c.ns || r["key"] != c.name {
				t.Errorf("audit --key %s: a record of %v/%v", c.printed, r["namespace"], r["key"])
			}
		}
		// The table line of audit --follow and watch prints the same form.
		if line := formatRecordLine(audit.Record{Op: protocol.OpAcquire, Namespace: c.ns, Key: c.name}); !strings.Contains(line, " "+c.printed+" ") {
			t.Errorf("the record line %q does not name %s", line, c.printed)
		}
	}
	// A namespace part whose escape is malformed is refused, not read as
	// another key.
	wantCode(t, runCLI(t, e, "get", "50%zz/x"), ExitUsage)
}
