package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// outcome is what one in-process run of leasectl produced.
type outcome struct {
	stdout, stderr string
	code           int
}

// json decodes stdout as exactly one JSON object.
func (o outcome) json(t *testing.T) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\nstdout: %s\nstderr: %s", err, o.stdout, o.stderr)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value: %s", o.stdout)
	}
	return m
}

// env is a fake environment for Execute.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// runCLI runs leasectl in-process with args and the environment e.
func runCLI(t *testing.T, e env, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Execute(ctx, args, nil, &stdout, &stderr, e.get)
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// sqliteEnv returns an environment whose LEASESTORE_DSN is a fresh SQLite
// file in a temporary directory.
func sqliteEnv(t *testing.T) env {
	return env{EnvDSN: "sqlite:" + filepath.Join(t.TempDir(), "leases.db")}
}

// migratedPostgresEnv runs leasectl on a migrated schema of its own on the test
// server.
func migratedPostgresEnv(t *testing.T) env { return env{EnvDSN: pgtest.MigratedDSN(t)} }

// sqlEnvs are the two SQL dialects' environments, by name, for tests
// that run on both.
func sqlEnvs() map[string]func(*testing.T) env {
	return map[string]func(*testing.T) env{"sqlite": sqliteEnv, "postgres": migratedPostgresEnv}
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func wantKeys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	// A sorted copy: want is often one of the shared lists, which parallel
	// tests read at the same time.
	want = slices.Sorted(slices.Values(want))
	if got := keys(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: keys %v, want exactly %v", what, got, want)
	}
}

func wantCode(t *testing.T, o outcome, code int) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", o.code, code, o.stdout, o.stderr)
	}
}

var resultKeys = []string{"status", "replayed", "request_id", "message", "lease"}
var leaseKeys = []string{"namespace", "key", "owner", "token", "acquired_at", "renewed_at", "expires_at", "version"}

// lease returns the "lease" object of a result, checking its shape.
func lease(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	l, ok := m["lease"].(map[string]any)
	if !ok {
		t.Fatalf("lease is %v, want an object", m["lease"])
	}
	wantKeys(t, "lease", l, leaseKeys...)
	for _, k := range []string{"acquired_at", "renewed_at", "expires_at"} {
		if _, err := time.Parse(time.RFC3339Nano, l[k].(string)); err != nil {
			t.Fatalf("lease %s = %v: %v", k, l[k], err)
		}
	}
	return l
}

func token(t *testing.T, m map[string]any) int64 {
	t.Helper()
	return int64(lease(t, m)["token"].(float64))
}

func itoa(n int64) string { return fmt.Sprint(n) }

func TestExitCodes(t *testing.T) {
	t.Parallel()
	want := map[string]int{
		"acquired": 0, "renewed": 0, "released": 0, "revoked": 0, "found": 0, "healthy": 0, "ok": 0,
		"invalid": 2, "conflict": 3, "not_found": 4, "stale_token": 4, "not_owner": 4, "expired": 4,
		"timeout": 5, "unavailable": 5, "closed": 5, "error": 1, "something else": 1,
	}
	for _, s := range protocol.Statuses {
		if _, ok := want[string(s)]; !ok {
			t.Errorf("status %q has no expected exit code in this test", s)
		}
	}
	for status, code := range want {
		if got := ExitCode(status); got != code {
			t.Errorf("ExitCode(%q) = %d, want %d", status, got, code)
		}
	}
}

func TestLeaseLifecycleJSON(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "job-1", "-n", "ns1", "--owner", "alice", "--ttl", "1m", "-o", "json")
	wantCode(t, acq, 0)
	m := acq.json(t)
	wantKeys(t, "acquire", m, resultKeys...)
	l := lease(t, m)
	if m["status"] != "acquired" || m["replayed"] != false || m["request_id"] == "" || l["namespace"] != "ns1" ||
		l["key"] != "job-1" || l["owner"] != "alice" || l["version"] != float64(1) {
		t.Fatalf("acquire: %v", m)
	}
	tok := token(t, m)

	get := runCLI(t, e, "get", "job-1", "-n", "ns1", "-o", "json")
	wantCode(t, get, 0)
	if g := get.json(t); g["status"] != "found" || token(t, g) != tok {
		t.Fatalf("get: %v", g)
	}

	ren := runCLI(t, e, "renew", "job-1", "-n", "ns1", "--owner", "alice", "--token", itoa(tok), "--ttl", "2m", "-o", "json")
	wantCode(t, ren, 0)
	r := ren.json(t)
	if r["status"] != "renewed" || token(t, r) != tok {
		t.Fatalf("renew: %v", r)
	}
	exp, _ := time.Parse(time.RFC3339Nano, lease(t, r)["expires_at"].(string))
	if left := time.Until(exp); left < time.Minute+30*time.Second {
		t.Fatalf("renew --ttl 2m: expires in %v", left)
	}

	lst := runCLI(t, e, "list", "-n", "ns1", "-o", "json")
	wantCode(t, lst, 0)
	lm := lst.json(t)
	wantKeys(t, "list", lm, "status", "leases", "next_cursor")
	if ls := lm["leases"].([]any); lm["status"] != "found" || len(ls) != 1 || lm["next_cursor"] != "" {
		t.Fatalf("list: %v", lm)
	}

	rel := runCLI(t, e, "release", "job-1", "-n", "ns1", "--owner", "alice", "--token", itoa(tok), "-o", "json")
	wantCode(t, rel, 0)
	if rm := rel.json(t); rm["status"] != "released" {
		t.Fatalf("release: %v", rm)
	}

	gone := runCLI(t, e, "get", "job-1", "-n", "ns1", "-o", "json")
	wantCode(t, gone, ExitRefused)
	gm := gone.json(t)
	wantKeys(t, "get not_found", gm, resultKeys...)
	if gm["status"] != "not_found" || gm["lease"] != nil {
		t.Fatalf("get after release: %v", gm)
	}

	empty := runCLI(t, e, "list", "-n", "ns1", "-o", "json")
	wantCode(t, empty, 0)
	if em := empty.json(t); em["status"] != "found" || len(em["leases"].([]any)) != 0 {
		t.Fatalf("empty list: %v", em)
	}
}

func TestConflictAndFencing(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	first := runCLI(t, e, "acquire", "shard", "--owner", "w1", "-o", "json")
	wantCode(t, first, 0)
	oldTok := token(t, first.json(t))

	for _, owner := range []string{"w2", "w1"} { // the same owner conflicts too
		second := runCLI(t, e, "acquire", "shard", "--owner", owner, "-o", "json")
		wantCode(t, second, ExitConflict)
		m := second.json(t)
		if m["status"] != "conflict" || lease(t, m)["owner"] != "w1" || token(t, m) != oldTok {
			t.Fatalf("conflict for %s: %v", owner, m)
		}
	}

	rev := runCLI(t, e, "revoke", "shard", "--reason", "stuck", "--actor", "ops", "-o", "json")
	wantCode(t, rev, 0)
	if m := rev.json(t); m["status"] != "revoked" || token(t, m) != oldTok {
		t.Fatalf("revoke: %v", m)
	}
	third := runCLI(t, e, "acquire", "shard", "--owner", "w2", "-o", "json")
	wantCode(t, third, 0)
	newTok := token(t, third.json(t))
	if newTok <= oldTok {
		t.Fatalf("new token %d is not greater than %d", newTok, oldTok)
	}

	for _, cmd := range []string{"renew", "release"} {
		stale := runCLI(t, e, cmd, "shard", "--owner", "w1", "--token", itoa(oldTok), "-o", "json")
		wantCode(t, stale, ExitRefused)
		m := stale.json(t)
		if m["status"] != "stale_token" || token(t, m) != newTok || lease(t, m)["owner"] != "w2" {
			t.Fatalf("%s with the stale token: %v", cmd, m)
		}
	}
	notOwner := runCLI(t, e, "renew", "shard", "--owner", "w1", "--token", itoa(newTok), "-o", "json")
	wantCode(t, notOwner, ExitRefused)
	if m := notOwner.json(t); m["status"] != "not_owner" {
		t.Fatalf("renew by the wrong owner: %v", m)
	}
}

func TestExpired(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "short", "--owner", "w1", "--ttl", "1ms", "-o", "json")
	wantCode(t, acq, 0)
	tok := token(t, acq.json(t))
	exp, _ := time.Parse(time.RFC3339Nano, lease(t, acq.json(t))["expires_at"].(string))
	// SQLite judges expiry by this machine's clock: wait until it has passed.
	for time.Now().Before(exp.Add(time.Millisecond)) {
		time.Sleep(time.Until(exp) + time.Millisecond)
	}
	ren := runCLI(t, e, "renew", "short", "--owner", "w1", "--token", itoa(tok), "-o", "json")
	wantCode(t, ren, ExitRefused)
	if m := ren.json(t); m["status"] != "expired" {
		t.Fatalf("renew after expiry: %v", m)
	}
	list := runCLI(t, e, "list", "--include-expired", "-o", "json")
	wantCode(t, list, 0)
	if ls := list.json(t)["leases"].([]any); len(ls) != 1 {
		t.Fatalf("list --include-expired: %v", ls)
	}
	live := runCLI(t, e, "list", "-o", "json")
	if ls := live.json(t)["leases"].([]any); len(ls) != 0 {
		t.Fatalf("list without expired: %v", ls)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	first := runCLI(t, e, "acquire", "k", "--owner", "w1", "--request-id", "req-1", "-o", "json")
	wantCode(t, first, 0)
	again := runCLI(t, e, "acquire", "k", "--owner", "w1", "--request-id", "req-1", "-o", "json")
	wantCode(t, again, 0)
	m1, m2 := first.json(t), again.json(t)
	if m2["replayed"] != true || m2["request_id"] != "req-1" || token(t, m1) != token(t, m2) {
		t.Fatalf("replay: first %v, again %v", m1, m2)
	}
	other := runCLI(t, e, "acquire", "k", "--owner", "w2", "--request-id", "req-1", "-o", "json")
	wantCode(t, other, ExitUsage)
	if m := other.json(t); m["status"] != "invalid" {
		t.Fatalf("reused request id: %v", m)
	}
	table := runCLI(t, e, "acquire", "k", "--owner", "w1", "--request-id", "req-1")
	wantCode(t, table, 0)
	if !strings.Contains(table.stdout, "replayed") {
		t.Fatalf("table output does not say the outcome was replayed:\n%s", table.stdout)
	}
}

func TestTableOutput(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "default/scan/10.0.0.0-24", "--owner", "worker-1", "--ttl", "90s")
	wantCode(t, acq, 0)
	for _, want := range []string{"acquired default/scan", "owner", "worker-1", "token", "expires", "in 1m30s", "request id"} {
		if !strings.Contains(acq.stdout, want) {
			t.Errorf("acquire table output lacks %q:\n%s", want, acq.stdout)
		}
	}
	list := runCLI(t, e, "list")
	wantCode(t, list, 0)
	for _, want := range []string{"NAMESPACE", "KEY", "OWNER", "TOKEN", "TIME LEFT", "scan/10.0.0.0-24", "worker-1"} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("list table lacks %q:\n%s", want, list.stdout)
		}
	}
	conflict := runCLI(t, e, "acquire", "default/scan/10.0.0.0-24", "--owner", "worker-2")
	wantCode(t, conflict, ExitConflict)
	if !strings.HasPrefix(conflict.stdout, "conflict default/scan/10.0.0.0-24: held by worker-1 with token 1 until ") {
		t.Errorf("conflict table output:\n%s", conflict.stdout)
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for i := range 5 {
		wantCode(t, runCLI(t, e, "acquire", fmt.Sprintf("k%d", i), "--owner", "w"), 0)
	}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more pages than expected; names so far %v", names)
		}
		args := []string{"list", "--limit", "2", "-o", "json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		o := runCLI(t, e, args...)
		wantCode(t, o, 0)
		m := o.json(t)
		for _, l := range m["leases"].([]any) {
			names = append(names, l.(map[string]any)["key"].(string))
		}
		cursor = m["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if want := []string{"k0", "k1", "k2", "k3", "k4"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("paged names %v, want %v", names, want)
	}
	bad := runCLI(t, e, "list", "--cursor", "garbage", "-o", "json")
	wantCode(t, bad, ExitUsage)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	cases := [][]string{
		{"acquire", "k", "--ttl", "soon"},
		{"acquire", "k", "--ttl", "0s"},
		{"acquire", "k", "--ttl", "1000h"},
		{"acquire"},
		{"acquire", "a", "b"},
		{"renew", "k", "--owner", "w"}, // --token is required
		{"revoke", "k"},                // --reason is required
		{"frobnicate"},
		{"get", "k", "--no-such-flag"},
		{"get", "k", "-o", "yaml"},
		{"get", "k", "--log-level", "loud"},
		{"get", "k", "--timeout", "-1s"},
		{"get", "bad\x01key"},
		{"audit", "--since", "yesterday"},
		{"bench", "--op", "sprint"},
		{"migrate"},
		{"migrate", "sideways"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			o := runCLI(t, e, args...)
			wantCode(t, o, ExitUsage)
			if o.stderr == "" && o.stdout == "" {
				t.Fatal("no message")
			}
		})
	}
	// In JSON mode the error is one object in the shape of the command's
	// answer (a result for the lease commands, a page for list and audit),
	// with status and message; {"status","message"} for the others.
	o := runCLI(t, e, "acquire", "k", "--ttl", "soon", "-o", "json")
	wantCode(t, o, ExitUsage)
	m := o.json(t)
	wantKeys(t, "usage error", m, "status", "replayed", "request_id", "message", "lease")
	if m["status"] != "invalid" || !strings.Contains(m["message"].(string), "ttl") || m["lease"] != nil {
		t.Fatalf("usage error object: %v", m)
	}
	o = runCLI(t, e, "list", "--limit", "5000", "-o", "json")
	wantCode(t, o, ExitUsage)
	wantKeys(t, "list error", o.json(t), "status", "leases", "next_cursor", "message")
	o = runCLI(t, e, "list", "--cursor", "garbage", "-o", "json")
	wantCode(t, o, ExitUsage)
	wantKeys(t, "list error", o.json(t), "status", "leases", "next_cursor", "message")
	o = runCLI(t, e, "audit", "--since", "yesterday", "-o", "json")
	wantCode(t, o, ExitUsage)
	wantKeys(t, "audit error", o.json(t), "status", "records", "next_cursor", "message")
	o = runCLI(t, e, "bench", "--op", "sprint", "-o", "json")
	wantCode(t, o, ExitUsage)
	wantKeys(t, "bench error", o.json(t), "status", "message")
}

func TestDSNForms(t *testing.T) {
	t.Parallel()
	// libpq's key=value form is PostgreSQL: tried (here unreachable), its password never shown.
	kv := runCLI(t, env{}, "get", "k", "--dsn", "host=127.0.0.1 port=1 password=hunter2hunter2", "--timeout", "2s")
	wantCode(t, kv, ExitUnavailable)
	if strings.Contains(kv.stdout+kv.stderr, "hunter2") {
		t.Fatalf("key=value dsn: the password leaked:\n%s\n%s", kv.stdout, kv.stderr)
	}
	for _, dsn := range []string{"mysql://root:hunter2hunter2@db/x", "sqlite:"} {
		o := runCLI(t, env{}, "get", "k", "--dsn", dsn, "-o", "json")
		wantCode(t, o, ExitUsage)
		m := o.json(t)
		if m["status"] != "invalid" || !strings.Contains(m["message"].(string), "dsn") {
			t.Fatalf("dsn %q: %v", dsn, m)
		}
		if strings.Contains(o.stdout+o.stderr, "hunter2") {
			t.Fatalf("dsn %q: the password leaked:\n%s\n%s", dsn, o.stdout, o.stderr)
		}
	}
	// The environment is used when --dsn is absent, and --dsn wins over it.
	dir := t.TempDir()
	e := env{EnvDSN: "sqlite:" + filepath.Join(dir, "env.db")}
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
	wantCode(t, runCLI(t, e, "get", "k"), 0)
	wantCode(t, runCLI(t, e, "get", "k", "--dsn", "sqlite:"+filepath.Join(dir, "flag.db")), ExitRefused)
}

// TestUnreachableEtcdHidesPassword: an etcd DSN with a password that
// reaches no cluster answers unavailable (exit 5) naming the endpoints,
// never the password; a malformed one is invalid (exit 2), also silent
// about the password.
func TestUnreachableEtcdHidesPassword(t *testing.T) {
	t.Parallel()
	const password = "s3cretEtcd"
	dsn := "etcd://root:" + password + "@127.0.0.1:1,127.0.0.1:2/leasestore?dial-timeout=1s"
	for _, args := range [][]string{
		{"get", "k", "--dsn", dsn, "-o", "json"},
		{"health", "--dsn", dsn, "--log-level", "debug"},
		{"migrate", "status", "--dsn", dsn, "-o", "json"},
	} {
		o := runCLI(t, env{}, append(args, "--timeout", "2s")...)
		wantCode(t, o, ExitUnavailable)
		if strings.Contains(o.stdout+o.stderr, password) {
			t.Fatalf("%v: the password appears in the output:\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
		if !strings.Contains(o.stdout+o.stderr, "127.0.0.1:1") {
			t.Fatalf("%v: the error does not say which cluster:\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
	}
	for _, bad := range []string{"etcd://root:" + password + "@127.0.0.1:1", "etcd://root:" + password + "@h/p?bogus=1"} {
		o := runCLI(t, env{}, "get", "k", "--dsn", bad, "-o", "json")
		wantCode(t, o, ExitUsage)
		if strings.Contains(o.stdout+o.stderr, password) {
			t.Fatalf("%q: the password appears in the output:\nstdout: %s\nstderr: %s", bad, o.stdout, o.stderr)
		}
	}
}

func TestUnreachablePostgresHidesPassword(t *testing.T) {
	t.Parallel()
	const password = "s3cretPW"
	dsn := "postgres://u:" + password + "@127.0.0.1:1/db?connect_timeout=2"
	for _, args := range [][]string{
		{"get", "k", "--dsn", dsn, "-o", "json"},
		{"get", "k", "--dsn=" + dsn},
		{"health", "--dsn", dsn, "--log-level", "debug"},
		{"migrate", "status", "--dsn", dsn, "-o", "json"},
		{"audit", "--dsn", dsn},
	} {
		o := runCLI(t, env{}, args...)
		wantCode(t, o, ExitUnavailable)
		if strings.Contains(o.stdout+o.stderr, password) {
			t.Fatalf("%v: the password appears in the output:\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
		if !strings.Contains(o.stdout+o.stderr, "127.0.0.1") {
			t.Fatalf("%v: the error does not say which server:\nstdout: %s\nstderr: %s", args, o.stdout, o.stderr)
		}
	}
	// The same through the environment.
	o := runCLI(t, env{EnvDSN: dsn}, "list", "-o", "json")
	wantCode(t, o, ExitUnavailable)
	if m := o.json(t); m["status"] != "unavailable" || strings.Contains(o.stdout+o.stderr, password) {
		t.Fatalf("list via LEASESTORE_DSN: %v\n%s", m, o.stderr)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dsn, text, secret string
	}{
		{"postgres://u:s3cretPW@h/db", "failed to connect to postgres://u:s3cretPW@h/db: refused", "s3cretPW"},
		{"postgres://u:p%40ss%2Fword@h/db", "password p@ss/word and raw p%40ss%2Fword", "p@ss/word"},
		{"postgres://u:p%40ss%2Fword@h/db", "raw p%40ss%2Fword", "p%40ss%2Fword"},
		{"postgresql://u@h/db?password=qu3ryPW&sslmode=disable", "dsn ...password=qu3ryPW&sslmode", "qu3ryPW"},
		{"postgres://u:we:ird@pw@h/db", "we:ird@pw was the password", "we:ird@pw"},
		{"", "postgres://x:shrt@host/db in an error", "shrt"},
		{"", "connect: host=db password='kv secret' user=u", "kv secret"},
		{"etcd://root:etcdPW1@h:2379,h2:2379/ls", "open etcd://root:etcdPW1@h:2379,h2:2379/ls: refused", "etcdPW1"},
		{"", "etcds://root:etcdPW2@[::1]:2379,[::1]:2380/ls", "etcdPW2"},
	}
	for _, c := range cases {
		r := newRedactor(c.dsn)
		got := r.redact(c.text)
		if strings.Contains(got, c.secret) {
			t.Errorf("redact(%q) with dsn %q = %q: still holds %q", c.text, c.dsn, got, c.secret)
		}
		if !strings.Contains(got, mask) {
			t.Errorf("redact(%q) = %q: nothing masked", c.text, got)
		}
	}
	// Short passwords are not masked in ordinary text (token 1 stays 1),
	// only inside DSN-shaped text.
	r := newRedactor("postgres://u:1@h/db")
	if got := r.redact("token 1"); got != "token 1" {
		t.Errorf("a one-character password mangled text: %q", got)
	}
	if got := r.redact("postgres://u:1@h/db"); strings.Contains(got, ":1@") {
		t.Errorf("DSN-shaped text kept a short password: %q", got)
	}
	if got := redactDSN("postgres://u:s3cretPW@h:5432/db?sslmode=disable"); got != "postgres://u:xxxxx@h:5432/db?sslmode=disable" {
		t.Errorf("redactDSN = %q", got)
	}
	// Redacting twice changes nothing more.
	shown := redactDSN("postgres://u@h/db?password=qu3ryPW")
	if got := newRedactor().redact("open " + shown + ": unavailable"); got != "open postgres://u@h/db?password=xxxxx: unavailable" {
		t.Errorf("redacting a redacted DSN again: %q", got)
	}
	if got := dsnArgs([]string{"get", "--dsn", "a", "--dsn=b", "--", "--dsn", "c"}); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("dsnArgs = %v", got)
	}
}

func TestAuditRevokeReason(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "db-1", "-n", "ops", "--owner", "w1", "-o", "json")
	wantCode(t, acq, 0)
	wantCode(t, runCLI(t, e, "acquire", "other", "-n", "ops", "--owner", "w2"), 0)
	wantCode(t, runCLI(t, e, "revoke", "db-1", "-n", "ops", "--reason", "INC-42: host is dead", "--actor", "oncall"), 0)

	o := runCLI(t, e, "audit", "-n", "ops", "--key", "db-1", "-o", "json")
	wantCode(t, o, 0)
	m := o.json(t)
	wantKeys(t, "audit", m, "status", "records", "next_cursor")
	recs := m["records"].([]any)
	if m["status"] != "found" || len(recs) != 2 {
		t.Fatalf("audit --key db-1: %v", m)
	}
	rev := recs[0].(map[string]any) // newest first
	wantKeys(t, "audit record", rev, "id", "at", "op", "namespace", "key", "owner", "token", "request_id", "actor",
		"reason", "status", "version")
	if rev["op"] != "revoke" || rev["status"] != "revoked" || rev["reason"] != "INC-42: host is dead" ||
		rev["actor"] != "oncall" || rev["owner"] != "w1" || int64(rev["token"].(float64)) != token(t, acq.json(t)) {
		t.Fatalf("revoke record: %v", rev)
	}

	all := runCLI(t, e, "audit", "-n", "ops", "--limit", "2", "-o", "json")
	wantCode(t, all, 0)
	am := all.json(t)
	if len(am["records"].([]any)) != 2 || am["next_cursor"] == "" {
		t.Fatalf("audit --limit 2 of 3 records: %v", am)
	}
	rest := runCLI(t, e, "audit", "-n", "ops", "--cursor", am["next_cursor"].(string), "-o", "json")
	if rm := rest.json(t); len(rm["records"].([]any)) != 1 {
		t.Fatalf("audit second page: %v", rm)
	}
	ops := func(o outcome) string {
		t.Helper()
		var out []string
		for _, r := range o.json(t)["records"].([]any) {
			out = append(out, r.(map[string]any)["op"].(string)+" "+r.(map[string]any)["key"].(string))
		}
		return strings.Join(out, ",")
	}
	// Newest first by default, oldest first on request; a cursor goes on
	// in the order of its page, with or without --order.
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "-o", "json")); got != "revoke db-1,acquire other,acquire db-1" {
		t.Fatalf("audit: %s, want newest first", got)
	}
	oldest := runCLI(t, e, "audit", "-n", "ops", "--order", "oldest", "--limit", "2", "-o", "json")
	if got := ops(oldest); got != "acquire db-1,acquire other" {
		t.Fatalf("audit --order oldest: %s", got)
	}
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "--cursor", oldest.json(t)["next_cursor"].(string), "-o", "json")); got != "revoke db-1" {
		t.Fatalf("audit --cursor of an oldest-first page: %s, want the rest oldest first", got)
	}
	wrong := runCLI(t, e, "audit", "-n", "ops", "--order", "newest", "--cursor", oldest.json(t)["next_cursor"].(string))
	wantCode(t, wrong, 2)
	if !strings.Contains(wrong.stderr, "cursor: from an oldest-first page; read it oldest first") {
		t.Fatalf("audit --order newest with an oldest-first cursor: %s", wrong.stderr)
	}
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "--op", "acquire", "-o", "json")); got != "acquire other,acquire db-1" {
		t.Fatalf("audit --op acquire: %s", got)
	}
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "--op", "revoke,acquire", "--owner", "w1", "--order", "oldest", "-o", "json")); got != "acquire db-1,revoke db-1" {
		t.Fatalf("audit --op revoke,acquire --owner w1: %s", got)
	}
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "--owner", "w2", "-o", "json")); got != "acquire other" {
		t.Fatalf("audit --owner w2: %s", got)
	}
	if got := ops(runCLI(t, e, "audit", "-n", "ops", "--owner", "oncall", "-o", "json")); got != "" {
		t.Fatalf("audit --owner oncall (the revoke's actor, not an owner): %s", got)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--op", "expire"}, `op: "expire" is not an operation the audit trail records (acquire,renew,release,revoke,prune)`},
		{[]string{"--order", "sideways"}, `--order: "sideways" is neither newest nor oldest`},
		{[]string{"--follow", "--order", "newest"}, "--order newest: --follow prints records as they come, oldest first"},
	} {
		bad := runCLI(t, e, append([]string{"audit", "-n", "ops"}, c.args...)...)
		wantCode(t, bad, 2)
		if !strings.Contains(bad.stderr, c.msg) || bad.stdout != "" {
			t.Fatalf("audit %q: stdout %q stderr %q, want exit 2 saying %q", c.args, bad.stdout, bad.stderr, c.msg)
		}
	}
	exp := runCLI(t, e, "audit", "export", "-n", "ops", "--op", "acquire")
	wantCode(t, exp, 0)
	if lines := strings.Split(strings.TrimSpace(exp.stdout), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], `"key":"db-1"`) || !strings.Contains(lines[1], `"key":"other"`) {
		t.Fatalf("audit export --op acquire (oldest first): %s", exp.stdout)
	}
	future := runCLI(t, e, "audit", "-n", "ops", "--since", time.Now().Add(time.Hour).Format(time.RFC3339), "-o", "json")
	if fm := future.json(t); len(fm["records"].([]any)) != 0 {
		t.Fatalf("audit --since in the future: %v", fm)
	}
	recent := runCLI(t, e, "audit", "-n", "ops", "--since", "1h", "-o", "json")
	if rm := recent.json(t); len(rm["records"].([]any)) != 3 {
		t.Fatalf("audit --since 1h: %v", rm)
	}
	table := runCLI(t, e, "audit", "-n", "ops")
	wantCode(t, table, 0)
	if !strings.Contains(table.stdout, "INC-42: host is dead") || !strings.Contains(table.stdout, "REASON") {
		t.Fatalf("audit table:\n%s", table.stdout)
	}
}

func TestAuditFollow(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "before", "--owner", "w1"), 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"audit", "--follow", "--since", "1h", "--interval", "20ms", "-o", "json"}, nil, &stdout, &stderr, e.get)
	}()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond(stdout.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("follow: waited for %s; stdout:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the existing record", func(s string) bool { return strings.Contains(s, `"key":"before"`) })
	wantCode(t, runCLI(t, e, "acquire", "after", "--owner", "w2"), 0)
	waitFor("the new record", func(s string) bool { return strings.Contains(s, `"key":"after"`) })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("follow exit code %d after interrupt; stderr: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	seen := map[string]int{}
	for _, line := range lines {
		var page auditJSON
		if err := json.Unmarshal([]byte(line), &page); err != nil {
			t.Fatalf("follow line is not an audit object: %q: %v", line, err)
		}
		for _, r := range page.Records {
			seen[r.Key]++
		}
	}
	if seen["before"] != 1 || seen["after"] != 1 {
		t.Fatalf("each record should be printed once: %v", seen)
	}
}

func TestHealthAndVersion(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	h := runCLI(t, e, "health", "-o", "json")
	wantCode(t, h, 0)
	if m := h.json(t); m["status"] != "healthy" || m["backend"] != "sqlite" {
		t.Fatalf("health: %v", m)
	}
	// A file that is no database: unavailable (a directory that does not
	// exist is refused before, as invalid input: TestSQLiteDSNInAMissingDirectoryIsUsage).
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database; ", 256)), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := runCLI(t, env{EnvDSN: "sqlite:" + garbage}, "health", "-o", "json")
	wantCode(t, bad, ExitUnavailable)
	if m := bad.json(t); m["status"] != "unavailable" {
		t.Fatalf("health on a file that is no database: %v", m)
	}
	missing := runCLI(t, env{EnvDSN: "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")}, "health", "-o", "json")
	wantCode(t, missing, ExitUsage)

	v := runCLI(t, env{}, "version", "-o", "json")
	wantCode(t, v, 0)
	m := v.json(t)
	if m["status"] != "ok" || m["module"] != "github.com/leasestore/leasestore" || !strings.HasPrefix(m["go"].(string), "go") {
		t.Fatalf("version: %v", m)
	}
	if vt := runCLI(t, env{}, "version"); !strings.HasPrefix(vt.stdout, "leasectl ") {
		t.Fatalf("version: %q", vt.stdout)
	}
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	st := runCLI(t, e, "migrate", "status", "-o", "json")
	wantCode(t, st, 0)
	if m := st.json(t); m["version"] != float64(0) || m["latest"] != float64(migrations.LatestVersion) {
		t.Fatalf("status of a fresh file: %v", m)
	}
	up := runCLI(t, e, "migrate", "up", "-o", "json")
	wantCode(t, up, 0)
	m := up.json(t)
	wantKeys(t, "migrate up", m, "status", "dialect", "direction", "migrations", "version")
	latest := float64(migrations.LatestVersion)
	if m["version"] != latest || len(m["migrations"].([]any)) != migrations.LatestVersion {
		t.Fatalf("migrate up: %v", m)
	}
	again := runCLI(t, e, "migrate", "up", "-o", "json")
	if m := again.json(t); len(m["migrations"].([]any)) != 0 || m["version"] != latest {
		t.Fatalf("second migrate up: %v", m)
	}
	for v := latest - 1; v >= 0; v-- {
		down := runCLI(t, e, "migrate", "down", "-o", "json")
		wantCode(t, down, 0)
		if m := down.json(t); m["version"] != v || len(m["migrations"].([]any)) != 1 {
			t.Fatalf("migrate down to %v: %v", v, m)
		}
	}
	none := runCLI(t, e, "migrate", "down")
	wantCode(t, none, 0)
	if !strings.Contains(none.stdout, "nothing to roll back") {
		t.Fatalf("migrate down at version 0: %q", none.stdout)
	}
	status := runCLI(t, e, "migrate", "status")
	if !strings.Contains(status.stdout, "pending") {
		t.Fatalf("migrate status after down: %q", status.stdout)
	}
	// Any lease command migrates a SQLite file on first use.
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
}

func TestEveryCommandHasHelpWithExample(t *testing.T) {
	t.Parallel()
	a := &app{getenv: env{}.get, defaultOwner: "u@h"}
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Name() != "leasectl" {
			paths = append(paths, strings.Fields(c.CommandPath())[1:])
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCommand())
	if len(paths) < 15 {
		t.Fatalf("found only %d commands: %v", len(paths), paths)
	}
	for _, p := range append(paths, []string{}) {
		o := runCLI(t, env{}, append(p, "--help")...)
		wantCode(t, o, 0)
		if !strings.Contains(o.stdout, "Examples:") {
			t.Errorf("leasectl %s --help has no example:\n%s", strings.Join(p, " "), o.stdout)
		}
	}
	comp := runCLI(t, env{}, "completion", "bash")
	wantCode(t, comp, 0)
	if !strings.Contains(comp.stdout, "leasectl") {
		t.Errorf("completion bash: %q", comp.stdout[:min(len(comp.stdout), 200)])
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	// A TTL above the default: the test must not lose a lease to a machine
	// starved of CPU by other tests (the demo's story is the same).
	o := runCLI(t, env{}, "demo", "-o", "json", "--ttl", "3s")
	wantCode(t, o, 0)
	m := o.json(t)
	if m["status"] != "ok" || m["backend"] != "sqlite" {
		t.Fatalf("demo: %v", m)
	}
	story := fmt.Sprint(m["story"])
	for _, want := range []string{"stale_token", "expired", "REFUSED", "revoked", "lost"} {
		if !strings.Contains(story, want) {
			t.Errorf("the demo's story lacks %q:\n%s", want, story)
		}
	}
	// Step 4 waits for the frozen lease to end (Hold with Wait), it does not
	// ask again on a timer.
	if !strings.Contains(story, "waits for shard-a") || strings.Contains(story, "asks for shard-a every") {
		t.Errorf("the demo's step 4 does not wait for shard-a:\n%s", story)
	}
	writes := m["writes"].(map[string]any)
	if writes["fenced"] != float64(1) {
		t.Errorf("fenced writes: %v", writes)
	}
	recs := m["records"].([]any)
	ops := map[string]int{}
	for _, r := range recs {
		ops[r.(map[string]any)["op"].(string)]++
	}
	// 3 winners + the take-over + the re-acquire; 2 releases; 1 revoke.
	if ops["acquire"] != 5 || ops["release"] != 2 || ops["revoke"] != 1 || ops["renew"] < 1 {
		t.Errorf("audit trail ops: %v", ops)
	}

	table := runCLI(t, env{}, "demo", "--ttl", "3s")
	wantCode(t, table, 0)
	for _, want := range []string{"fresh SQLite file", "Summary", "ID", "REASON"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("demo table output lacks %q", want)
		}
	}
}

func TestBench(t *testing.T) {
	t.Parallel()
	for _, op := range []string{benchAcquireRelease, benchRenew, benchMixed} {
		t.Run(op, func(t *testing.T) {
			e := sqliteEnv(t)
			o := runCLI(t, e, "bench", "--op", op, "--duration", "500ms", "--concurrency", "3", "--keys", "2",
				"-n", "benchns", "-o", "json")
			wantCode(t, o, 0)
			m := o.json(t)
			wantKeys(t, "bench", m, "status", "backend", "namespace", "op", "concurrency", "keys", "ops", "errors",
				"conflicts", "duration_s", "ops_per_sec", "p50_ms", "p99_ms")
			if m["status"] != "ok" || m["namespace"] != "benchns" || m["backend"] != "sqlite" || m["op"] != op || m["concurrency"] != float64(3) || m["keys"] != float64(2) {
				t.Fatalf("bench: %v", m)
			}
			if m["ops"].(float64) < 1 || m["errors"] != float64(0) || m["p50_ms"].(float64) <= 0 ||
				m["p99_ms"].(float64) < m["p50_ms"].(float64) {
				t.Fatalf("bench figures: %v\nstderr: %s", m, o.stderr)
			}
			if !strings.Contains(o.stderr, "bench") {
				t.Fatalf("no progress or summary on stderr: %q", o.stderr)
			}
			// Nothing is left held when the run ends.
			left := runCLI(t, e, "list", "-n", "benchns", "-o", "json")
			if ls := left.json(t)["leases"].([]any); len(ls) != 0 {
				t.Fatalf("bench left leases behind: %v", ls)
			}
		})
	}
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if diff := float64(got-c.want) / float64(c.want); diff < -0.02 || diff > 0.02 {
			t.Errorf("quantile(%v) = %v, want %v within 2%%", c.q, got, c.want)
		}
	}
	var empty histogram
	if empty.quantile(0.5) != 0 {
		t.Error("quantile of an empty histogram")
	}
}

// A replayed release answers the lease as the first release did, every time
// included; a time a record does not hold (records written before schema
// version 2) prints as null, never as year 1.
func TestReplayedReleasePrintsTheWholeLease(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "k", "--owner", "w1", "-o", "json")
	wantCode(t, acq, 0)
	tk := token(t, acq.json(t))
	args := []string{"release", "k", "--owner", "w1", "--token", fmt.Sprint(tk), "--request-id", "rel-1", "-o", "json"}
	wantCode(t, runCLI(t, e, args...), 0)
	again := runCLI(t, e, args...)
	wantCode(t, again, 0)
	if strings.Contains(again.stdout, "0001-01-01") {
		t.Fatalf("replayed release prints a zero time:\n%s", again.stdout)
	}
	m := again.json(t)
	l, ok := m["lease"].(map[string]any)
	if m["replayed"] != true || !ok {
		t.Fatalf("replayed release: %v", m)
	}
	first := acq.json(t)["lease"].(map[string]any)
	for _, f := range []string{"acquired_at", "renewed_at", "expires_at"} {
		if l[f] != first[f] {
			t.Fatalf("replayed release %s = %v, want %v as acquired", f, l[f], first[f])
		}
	}
	table := runCLI(t, e, "release", "k", "--owner", "w1", "--token", fmt.Sprint(tk), "--request-id", "rel-1")
	if strings.Contains(table.stdout, "0001-01-01") {
		t.Fatalf("table output prints a zero time:\n%s", table.stdout)
	}
}

// The "more:" hint of a table page is the whole command for the next page:
// it keeps the namespace and the limit, so following it reads the same list.
func TestNextPageHintKeepsTheFlags(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, k := range []string{"a", "b", "c"} {
		wantCode(t, runCLI(t, e, "acquire", k, "-n", "pg"), 0)
	}
	first := runCLI(t, e, "list", "-n", "pg", "--limit", "2")
	wantCode(t, first, 0)
	var hint string
	for _, line := range strings.Split(first.stdout, "\n") {
		if h, ok := strings.CutPrefix(line, "more: "); ok {
			hint = h
		}
	}
	fields := strings.Fields(hint)
	if len(fields) < 2 || fields[0] != "leasectl" || fields[1] != "list" {
		t.Fatalf("no next-page hint in:\n%s", first.stdout)
	}
	next := runCLI(t, e, fields[1:]...)
	wantCode(t, next, 0)
	if !strings.Contains(next.stdout, "pg ") || !strings.Contains(next.stdout, " c ") || strings.Contains(next.stdout, " a ") {
		t.Fatalf("following %q printed:\n%s", hint, next.stdout)
	}
}

// TestRenewWithoutTTLKeepsIt: renew without --ttl keeps the lease's own
// TTL (a 20s lease stays a 20s lease), and --ttl sets a new one.
func TestRenewWithoutTTLKeepsIt(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "20s", "-o", "json")
	wantCode(t, acq, 0)
	tok := itoa(token(t, acq.json(t)))
	ttlOf := func(o outcome) time.Duration {
		t.Helper()
		l := lease(t, o.json(t))
		renewed, err1 := time.Parse(time.RFC3339Nano, l["renewed_at"].(string))
		expires, err2 := time.Parse(time.RFC3339Nano, l["expires_at"].(string))
		if err1 != nil || err2 != nil {
			t.Fatalf("lease times: %v %v", err1, err2)
		}
		return expires.Sub(renewed)
	}
	ren := runCLI(t, e, "renew", "k", "--owner", "w1", "--token", tok, "-o", "json")
	wantCode(t, ren, 0)
	if got := ttlOf(ren); got != 20*time.Second {
		t.Fatalf("renew without --ttl of a 20s lease: a %v lease, want 20s", got)
	}
	ren = runCLI(t, e, "renew", "k", "--owner", "w1", "--token", tok, "--ttl", "1d", "-o", "json")
	wantCode(t, ren, 0)
	if got := ttlOf(ren); got != 24*time.Hour {
		t.Fatalf("renew --ttl 1d: a %v lease", got)
	}
	ren = runCLI(t, e, "renew", "k", "--owner", "w1", "--token", tok, "-o", "json")
	if got := ttlOf(ren); got != 24*time.Hour {
		t.Fatalf("renew without --ttl after --ttl 1d: a %v lease, want 1d", got)
	}
}

// TestAllNamespacesFlag: -A reads every namespace on audit, watch's flags
// and audit export, and goes apart from -n.
func TestAllNamespacesFlag(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, ns := range []string{"a", "b"} {
		wantCode(t, runCLI(t, e, "acquire", "k", "-n", ns, "--owner", "w"), 0)
	}
	o := runCLI(t, e, "audit", "-A", "-o", "json")
	wantCode(t, o, 0)
	if n := len(o.json(t)["records"].([]any)); n != 2 {
		t.Fatalf("audit -A: %d records, want 2", n)
	}
	o = runCLI(t, e, "audit", "export", "-A")
	wantCode(t, o, 0)
	if n := strings.Count(o.stdout, "\n"); n != 2 {
		t.Fatalf("audit export -A: %d lines, want 2:\n%s", n, o.stdout)
	}
	for _, args := range [][]string{{"audit", "-A", "-n", "a"}, {"watch", "-A", "-n", "a"}, {"audit", "export", "-A", "-n", "a"}} {
		wantCode(t, runCLI(t, e, args...), ExitUsage)
	}
}

// TestRenewExplicitTTLOutOfRange: only the absence of --ttl keeps the
// lease's TTL; an explicit --ttl outside [1ms, 168h] (0s, 0, 169h, -1s) is
// refused with exit 2 as acquire refuses it, and the lease is untouched.
// renew --ttl 0s was accepted and kept the TTL.
func TestRenewExplicitTTLOutOfRange(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "20s", "-o", "json")
	wantCode(t, acq, 0)
	tok := itoa(token(t, acq.json(t)))
	for _, ttl := range []string{"--ttl=0s", "--ttl=0", "--ttl=169h", "--ttl=-1s", "--ttl=0d"} {
		o := runCLI(t, e, "renew", "k", "--owner", "w1", "--token", tok, ttl)
		wantCode(t, o, ExitUsage)
		if !strings.Contains(o.stderr, "ttl") || o.stdout != "" {
			t.Errorf("renew %s: stdout %q, stderr %q; want only an error naming ttl", ttl, o.stdout, o.stderr)
		}
	}
	o := runCLI(t, e, "audit", "-o", "json")
	wantCode(t, o, 0)
	if n := len(o.json(t)["records"].([]any)); n != 1 {
		t.Fatalf("refused renews wrote to the trail: %d records, want the acquire's only", n)
	}
}

// TestBareZeroDuration: a duration is written with a unit, 0 too (0s);
// a bare 0 is refused with the form to use, except by the flags whose help
// gives 0 a meaning (--wait-timeout 0, --lock-delay 0; gc --grace 0 in
// TestGC). --since 0 was
// accepted.
func TestBareZeroDuration(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, args := range [][]string{
		{"audit", "--since", "0"},
		{"watch", "--since", "0"},
		{"audit", "export", "--since", "0"},
		{"audit", "prune", "--before", "0", "--yes"},
	} {
		o := runCLI(t, e, args...)
		wantCode(t, o, ExitUsage)
		if !strings.Contains(o.stderr, `"0" has no unit: write 0s`) {
			t.Errorf("%q: stderr %q, want the form to use (0s)", args, o.stderr)
		}
	}
	// Where 0s is refused too, the hint names a duration the flag takes
	// (TestBareNumberHintIsTaken).
	for _, args := range [][]string{
		{"--timeout", "0", "get", "k"},
		{"acquire", "k", "--ttl", "0"},
	} {
		o := runCLI(t, e, args...)
		wantCode(t, o, ExitUsage)
		if !strings.Contains(o.stderr, `"0" has no unit: write a`) || strings.Contains(o.stderr, "write 0s") {
			t.Errorf("%q: stderr %q, want a duration the flag takes", args, o.stderr)
		}
	}
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w", "--lock-delay", "0", "--wait", "--wait-timeout", "0"), 0)
	wantCode(t, runCLI(t, e, "audit", "--since", "0s"), 0)
}
