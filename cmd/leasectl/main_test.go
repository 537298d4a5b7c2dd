package main

// End-to-end tests: TestMain builds the leasectl binary once, and every test
// runs it as a user would, in a process of its own, against SQLite (a
// temporary file) and PostgreSQL (a fresh schema from pgtest), checking
// exit codes and the JSON output pinned by DESIGN.md.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
)

// bin is the leasectl binary built by TestMain; fillAudit is the
// testdata/fillaudit program it builds beside it.
var bin, fillAudit string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasectl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temporary directory:", err)
		os.Exit(1)
	}
	bin, fillAudit = filepath.Join(dir, "leasectl"), filepath.Join(dir, "fillaudit")
	for out, pkg := range map[string]string{bin: ".", fillAudit: "./testdata/fillaudit"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: go build", pkg+":", err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// Any user may run the binaries (TestReadOnlySQLite runs leasectl as
	// nobody). They are never copied or written while tests run: a file
	// written by a test can be busy (ETXTBSY) when executed, held open by a
	// process that another parallel test forked at that moment.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	// The cleanup exits with goleak's code: returning would exit with the
	// tests' code, and a leak would fail nothing.
	opts := append(pgtest.LeakOptions(), goleak.Cleanup(func(code int) { _ = os.RemoveAll(dir); os.Exit(code) }))
	goleak.VerifyTestMain(etcdcluster.WithShared(m), opts...)
}

// run is one finished leasectl process.
type run struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r run) String() string {
	return fmt.Sprintf("leasectl %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// obj decodes stdout as exactly one JSON object.
func (r run) obj(t *testing.T) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value\n%s", r)
	}
	return m
}

// leasectl runs leasectl with args in dir, with LEASESTORE_DSN=dsn when dsn is
// not empty (and never inherited from the test's environment).
type leasectl struct {
	dir string
	dsn string
}

// startLines starts cmd (made by command, stdout not yet taken) and
// returns its stdout's lines as they come; the channel closes when stdout
// does.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

func (c leasectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASESTORE_DSN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if c.dsn != "" {
		cmd.Env = append(cmd.Env, "LEASESTORE_DSN="+c.dsn)
	}
	cmd.Env = append(cmd.Env, "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	return cmd
}

func (c leasectl) run(t *testing.T, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.command(ctx, migrateTimeout(c.dsn, args)...)
	return finish(t, cmd, args, cmd.Run())
}

// migrateTimeout gives a migrate command on PostgreSQL that sets no
// --timeout one of a minute, not the default 5s: migration 6 builds its
// index CONCURRENTLY, which waits for every older transaction in the
// database, and the other packages' tests run theirs beside these on the
// same database (TestPostgresMigrate timed out after 5s in CI under load).
// A test of migrate's deadline gives its own --timeout.
func migrateTimeout(dsn string, args []string) []string {
	if len(args) == 0 || args[0] != "migrate" || !strings.HasPrefix(dsn, "postgres") || slices.ContainsFunc(args, func(a string) bool {
		return a == "--timeout" || strings.HasPrefix(a, "--timeout=")
	}) {
		return args
	}
	return append(slices.Clip(args), "--timeout", "1m")
}

// finish collects a process made by command.
func finish(t *testing.T, cmd *exec.Cmd, args []string, err error) run {
	t.Helper()
	r := run{args: args, stdout: cmd.Stdout.(*bytes.Buffer).String(), stderr: cmd.Stderr.(*bytes.Buffer).String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("leasectl %v did not run: %v", args, err)
	}
	return r
}

func (c leasectl) runJSON(t *testing.T, wantCode int, args ...string) map[string]any {
	t.Helper()
	r := c.run(t, append(args, "-o", "json")...)
	if r.code != wantCode {
		t.Fatalf("exit code %d, want %d\n%s", r.code, wantCode, r)
	}
	return r.obj(t)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func wantKeys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	// A sorted copy: want is often one of the shared lists below, which
	// parallel tests read at the same time.
	want = slices.Sorted(slices.Values(want))
	if got := sortedKeys(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: keys %v, want exactly %v", what, got, want)
	}
}

var (
	resultKeys = []string{"status", "replayed", "request_id", "message", "lease"}
	leaseKeys  = []string{"namespace", "key", "owner", "token", "acquired_at", "renewed_at", "expires_at", "version"}
	recordKeys = []string{"id", "at", "op", "namespace", "key", "owner", "token", "request_id", "actor", "reason", "status", "version"}
	benchKeys  = []string{"status", "backend", "namespace", "op", "concurrency", "keys", "ops", "errors", "conflicts",
		"duration_s", "ops_per_sec", "p50_ms", "p99_ms"}
)

// result checks a lease operation's JSON and returns its lease (nil when null).
func result(t *testing.T, m map[string]any, status string) map[string]any {
	t.Helper()
	wantKeys(t, "result", m, resultKeys...)
	if m["status"] != status {
		t.Fatalf("status %v, want %s: %v", m["status"], status, m)
	}
	if m["lease"] == nil {
		return nil
	}
	l := m["lease"].(map[string]any)
	wantKeys(t, "lease", l, leaseKeys...)
	for _, k := range []string{"acquired_at", "renewed_at", "expires_at"} {
		if _, err := time.Parse(time.RFC3339Nano, l[k].(string)); err != nil {
			t.Fatalf("lease %s: %v", k, err)
		}
	}
	return l
}

func tok(l map[string]any) string { return fmt.Sprint(int64(l["token"].(float64))) }

// exercise runs every lease command against the store of c.
func exercise(t *testing.T, c leasectl, backend string) {
	h := c.runJSON(t, 0, "health")
	if h["status"] != "healthy" || h["backend"] != backend {
		t.Fatalf("health: %v", h)
	}

	// Two processes race to acquire one key: exactly one wins.
	racers := make([]run, 2)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"acquire", "race", "-n", "e2e", "--owner", fmt.Sprintf("racer-%d", i), "-o", "json"}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := c.command(ctx, args...)
			racers[i] = finish(t, cmd, args, cmd.Run())
		}()
	}
	wg.Wait()
	codes := []int{racers[0].code, racers[1].code}
	sort.Ints(codes)
	if !reflect.DeepEqual(codes, []int{0, 3}) {
		t.Fatalf("racing acquires exited %v, want one 0 and one 3\n%s\n%s", codes, racers[0], racers[1])
	}
	winner, loser := racers[0], racers[1]
	if winner.code != 0 {
		winner, loser = loser, winner
	}
	won := result(t, winner.obj(t), "acquired")
	held := result(t, loser.obj(t), "conflict")
	if held["owner"] != won["owner"] || tok(held) != tok(won) {
		t.Fatalf("the conflict shows %v, the winner holds %v", held, won)
	}
	owner, oldTok := won["owner"].(string), tok(won)

	got := result(t, c.runJSON(t, 0, "get", "race", "-n", "e2e"), "found")
	if tok(got) != oldTok {
		t.Fatalf("get: %v", got)
	}
	renewed := result(t, c.runJSON(t, 0, "renew", "race", "-n", "e2e", "--owner", owner, "--token", oldTok, "--ttl", "45s"), "renewed")
	if tok(renewed) != oldTok || renewed["renewed_at"] == won["renewed_at"] && renewed["expires_at"] == won["expires_at"] {
		t.Fatalf("renew: %v after %v", renewed, won)
	}
	list := c.runJSON(t, 0, "list", "-n", "e2e")
	wantKeys(t, "list", list, "status", "leases", "next_cursor")
	if list["status"] != "found" || len(list["leases"].([]any)) != 1 || list["next_cursor"] != "" {
		t.Fatalf("list: %v", list)
	}
	wantKeys(t, "listed lease", list["leases"].([]any)[0].(map[string]any), leaseKeys...)

	// An operator revokes; the next acquire gets a greater token; the old
	// holder's token is stale.
	result(t, c.runJSON(t, 0, "revoke", "race", "-n", "e2e", "--reason", "e2e: host drained", "--actor", "oncall"), "revoked")
	next := result(t, c.runJSON(t, 0, "acquire", "race", "-n", "e2e", "--owner", "newcomer"), "acquired")
	if next["token"].(float64) <= won["token"].(float64) {
		t.Fatalf("token after revoke %v is not greater than %v", next["token"], won["token"])
	}
	stale := c.runJSON(t, 4, "renew", "race", "-n", "e2e", "--owner", owner, "--token", oldTok)
	if l := result(t, stale, "stale_token"); tok(l) != tok(next) || l["owner"] != "newcomer" {
		t.Fatalf("stale renew shows %v", l)
	}
	result(t, c.runJSON(t, 4, "release", "race", "-n", "e2e", "--owner", owner, "--token", oldTok), "stale_token")
	result(t, c.runJSON(t, 4, "renew", "race", "-n", "e2e", "--owner", "intruder", "--token", tok(next)), "not_owner")

	// Bad input: exit 2, one JSON object.
	for _, ttl := range []string{"soon", "0s", "-5s"} {
		bad := c.runJSON(t, 2, "acquire", "other", "-n", "e2e", "--ttl", ttl)
		if bad["status"] != "invalid" {
			t.Fatalf("--ttl %s: %v", ttl, bad)
		}
	}
	if r := c.run(t, "no-such-command"); r.code != 2 {
		t.Fatalf("unknown command:\n%s", r)
	}

	result(t, c.runJSON(t, 0, "release", "race", "-n", "e2e", "--owner", "newcomer", "--token", tok(next)), "released")
	if l := result(t, c.runJSON(t, 4, "get", "race", "-n", "e2e"), "not_found"); l != nil {
		t.Fatalf("get after release has a lease: %v", l)
	}
	result(t, c.runJSON(t, 4, "revoke", "race", "-n", "e2e", "--reason", "nothing there"), "not_found")

	// The revoke and its reason are in the audit trail.
	audit := c.runJSON(t, 0, "audit", "-n", "e2e", "--key", "race")
	wantKeys(t, "audit", audit, "status", "records", "next_cursor")
	var ops []string
	var revoke map[string]any
	for _, r := range audit["records"].([]any) {
		rec := r.(map[string]any)
		wantKeys(t, "audit record", rec, recordKeys...)
		ops = append(ops, rec["op"].(string))
		if rec["op"] == "revoke" {
			revoke = rec
		}
	}
	if want := []string{"release", "acquire", "revoke", "renew", "acquire"}; !reflect.DeepEqual(ops, want) {
		t.Fatalf("audit ops %v, want %v (newest first)", ops, want)
	}
	// The filters and both orders: newest-first pages of 2 are the
	// oldest-first records reversed; bad values exit 2 and print no page.
	auditOps := func(args ...string) (ops []string, cursor string) {
		t.Helper()
		page := c.runJSON(t, 0, append([]string{"audit", "-n", "e2e", "--key", "race"}, args...)...)
		for _, r := range page["records"].([]any) {
			rec := r.(map[string]any)
			ops = append(ops, rec["op"].(string)+" "+rec["owner"].(string))
		}
		return ops, page["next_cursor"].(string)
	}
	oldest, _ := auditOps("--order", "oldest")
	var newest []string
	for cursor, pages := "", 0; ; pages++ {
		args := []string{"--limit", "2"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		page, next := auditOps(args...)
		newest = append(newest, page...)
		if cursor = next; cursor == "" || pages > 5 {
			break
		}
	}
	slices.Reverse(newest)
	if len(oldest) != 5 || !reflect.DeepEqual(newest, oldest) {
		t.Fatalf("audit newest first in pages of 2, reversed: %v; oldest first: %v", newest, oldest)
	}
	if got, _ := auditOps("--op", "revoke,release", "--order", "oldest"); !reflect.DeepEqual(got, []string{"revoke " + owner, "release newcomer"}) {
		t.Fatalf("audit --op revoke,release: %v", got)
	}
	if got, _ := auditOps("--op", "acquire", "--owner", "newcomer"); !reflect.DeepEqual(got, []string{"acquire newcomer"}) {
		t.Fatalf("audit --op acquire --owner newcomer: %v", got)
	}
	for _, c2 := range []struct{ args, msg string }{
		{"--op expire", `"expire" is not an operation the audit trail records`},
		{"--order up", `--order: "up" is neither newest nor oldest`},
		{"--follow --order newest", "--order newest: --follow prints records as they come, oldest first"},
	} {
		bad := c.runJSON(t, 2, append([]string{"audit", "-n", "e2e"}, strings.Fields(c2.args)...)...)
		if msg, _ := bad["message"].(string); bad["status"] != "invalid" || !strings.Contains(msg, c2.msg) {
			t.Fatalf("audit %s: %v, want status invalid and a message with %q", c2.args, bad, c2.msg)
		}
	}
	if revoke["reason"] != "e2e: host drained" || revoke["actor"] != "oncall" || revoke["owner"] != owner ||
		tok(revoke) != oldTok || revoke["status"] != "revoked" {
		t.Fatalf("revoke record: %v", revoke)
	}
	if r := c.run(t, "audit", "-n", "e2e"); r.code != 0 || !strings.Contains(r.stdout, "e2e: host drained") {
		t.Fatalf("audit table:\n%s", r)
	}

	v := c.runJSON(t, 0, "version")
	if v["module"] != "github.com/leasestore/leasestore" {
		t.Fatalf("version: %v", v)
	}

	// At debug level bench logs the status of every operation it did not
	// expect, so that a failure says what went wrong.
	br := c.run(t, "bench", "--duration", "1s", "--concurrency", "4", "--keys", "2", "-o", "json", "--log-level", "debug")
	if br.code != 0 {
		t.Fatalf("bench: exit code %d\n%s", br.code, br)
	}
	b := br.obj(t)
	wantKeys(t, "bench", b, benchKeys...)
	if b["backend"] != backend || b["op"] != "acquire-release" || b["concurrency"] != float64(4) || b["keys"] != float64(2) ||
		b["ops"].(float64) < 1 || b["errors"] != float64(0) || b["duration_s"].(float64) < 1 {
		var unexpected []string
		for _, line := range strings.Split(br.stderr, "\n") {
			if strings.Contains(line, "unexpected") {
				unexpected = append(unexpected, line)
			}
		}
		t.Fatalf("bench: %v\nunexpected outcomes:\n%s", b, strings.Join(unexpected, "\n"))
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exercise(t, leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}, "sqlite")
}

func TestSQLiteDefaultDSN(t *testing.T) {
	t.Parallel()
	// Without --dsn or LEASESTORE_DSN, leasectl uses leasestore.db in the
	// working directory, created and migrated on first use.
	c := leasectl{dir: t.TempDir()}
	result(t, c.runJSON(t, 0, "acquire", "k", "--owner", "w"), "acquired")
	if _, err := os.Stat(filepath.Join(c.dir, "leasestore.db")); err != nil {
		t.Fatalf("the default store was not created: %v", err)
	}
	result(t, c.runJSON(t, 3, "acquire", "k", "--owner", "w"), "conflict")
}

// TestRefusedRenewTTLCreatesNoStore: renew with an explicit --ttl outside
// [1ms, 168h] is refused (exit 2) before any store is opened, as acquire's
// is: in a fresh directory with the default DSN no leasestore.db appears.
// renew --ttl 0s ran (exit 4, not_found) and created the store.
func TestRefusedRenewTTLCreatesNoStore(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir()}
	for _, ttl := range []string{"--ttl=0s", "--ttl=0", "--ttl=200h"} {
		for _, args := range [][]string{{"acquire", "k"}, {"renew", "k", "--token", "1"}} {
			if r := c.run(t, append(args, "--owner", "w", ttl)...); r.code != 2 || !strings.Contains(r.stderr, "ttl") {
				t.Errorf("exit %d, want 2\n%s", r.code, r)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(c.dir, "leasestore.db")); err == nil {
		t.Fatal("a refused command created the default store")
	}
}

func TestSQLiteFreshFileRace(t *testing.T) {
	t.Parallel()
	// Two processes meeting a file that does not exist yet both create and
	// migrate it; exactly one gets the lease.
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "fresh.db")}
	var wg sync.WaitGroup
	runs := make([]run, 2)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"acquire", "k", "--owner", fmt.Sprintf("w%d", i), "-o", "json"}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := c.command(ctx, args...)
			runs[i] = finish(t, cmd, args, cmd.Run())
		}()
	}
	wg.Wait()
	codes := []int{runs[0].code, runs[1].code}
	sort.Ints(codes)
	if !reflect.DeepEqual(codes, []int{0, 3}) {
		t.Fatalf("exit codes %v, want one 0 and one 3\n%s\n%s", codes, runs[0], runs[1])
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	exercise(t, leasectl{dir: t.TempDir(), dsn: dsn}, "postgres")
}

func TestPostgresMigrate(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: pgtest.DSN(t)} // an empty schema

	// Never migrated implicitly: a clear error naming the command, exit 5.
	for _, args := range [][]string{{"get", "k"}, {"acquire", "k", "--owner", "w"}, {"health"}} {
		m := c.runJSON(t, 5, args...)
		if m["status"] != "unavailable" || !strings.Contains(m["message"].(string), "leasectl migrate up") {
			t.Fatalf("%v on an unmigrated schema: %v", args, m)
		}
	}
	if r := c.run(t, "get", "k"); r.code != 5 || !strings.Contains(r.stderr, "leasectl migrate up") {
		t.Fatalf("table mode on an unmigrated schema:\n%s", r)
	}

	st := c.runJSON(t, 0, "migrate", "status")
	if st["dialect"] != "postgres" || st["version"] != float64(0) || st["latest"] != float64(migrations.LatestVersion) {
		t.Fatalf("migrate status before: %v", st)
	}
	up := c.runJSON(t, 0, "migrate", "up")
	if up["version"] != float64(migrations.LatestVersion) || len(up["migrations"].([]any)) != migrations.LatestVersion {
		t.Fatalf("migrate up: %v", up)
	}
	if again := c.runJSON(t, 0, "migrate", "up"); len(again["migrations"].([]any)) != 0 {
		t.Fatalf("second migrate up: %v", again)
	}
	st = c.runJSON(t, 0, "migrate", "status")
	ms := st["migrations"].([]any)
	if st["version"] != float64(migrations.LatestVersion) || len(ms) != migrations.LatestVersion ||
		ms[len(ms)-1].(map[string]any)["state"] != "applied" {
		t.Fatalf("migrate status after: %v", st)
	}
	result(t, c.runJSON(t, 0, "acquire", "k", "--owner", "w"), "acquired")

	// Rolling the newest migration back keeps the data; this release needs
	// it, so it refuses to serve until migrated up again.
	delayed := c.runJSON(t, 0, "acquire", "delayed", "--owner", "w", "--lock-delay", "1m")
	if delayed["status"] != "acquired" {
		t.Fatalf("acquire with a lock-delay: %v", delayed)
	}
	down := c.runJSON(t, 0, "migrate", "down")
	if down["version"] != float64(migrations.LatestVersion-1) || len(down["migrations"].([]any)) != 1 {
		t.Fatalf("migrate down: %v", down)
	}
	c.runJSON(t, 5, "get", "k")
	// The migrations above the lock-delay one (4) roll back freely.
	const lockDelayVersion = 4
	for v := migrations.LatestVersion - 1; v > lockDelayVersion; v-- {
		if down := c.runJSON(t, 0, "migrate", "down"); down["version"] != float64(v-1) {
			t.Fatalf("migrate down from version %d: %v", v, down)
		}
	}

	// A held lease with a lock-delay keeps the lock-delay migration (4)
	// from being rolled back: exit 2, nothing written, naming
	// --drop-lock-delays, which rolls it back.
	if r := c.run(t, "migrate", "down"); r.code != 2 || !strings.Contains(r.stderr, "1 held lease(s) carry a lock-delay") ||
		!strings.Contains(r.stderr, "--drop-lock-delays") {
		t.Fatalf("migrate down with a lock-delay in force: want exit 2 naming the lock-delay and --drop-lock-delays\n%s", r)
	}
	if st := c.runJSON(t, 0, "migrate", "status"); st["version"] != float64(lockDelayVersion) {
		t.Fatalf("a refused migrate down changed the version: %v", st)
	}
	down = c.runJSON(t, 0, "migrate", "down", "--drop-lock-delays")
	if down["version"] != float64(lockDelayVersion-1) || len(down["migrations"].([]any)) != 1 {
		t.Fatalf("migrate down --drop-lock-delays: %v", down)
	}
	c.runJSON(t, 5, "get", "k")
	c.runJSON(t, 0, "migrate", "up")
	result(t, c.runJSON(t, 0, "get", "k"), "found")
}

func TestUnreachablePostgres(t *testing.T) {
	t.Parallel()
	const password = "s3cretPW"
	dsn := "postgres://u:" + password + "@127.0.0.1:1/db"
	c := leasectl{dir: t.TempDir()}
	for _, args := range [][]string{
		{"get", "k", "--dsn", dsn},
		{"get", "k", "--dsn", dsn, "-o", "json"},
		{"acquire", "k", "--dsn", dsn, "--log-level", "debug"},
		{"health", "--dsn", dsn, "-o", "json"},
		{"migrate", "up", "--dsn", dsn},
		{"audit", "--dsn", dsn, "-o", "json"},
		{"bench", "--dsn", dsn, "--duration", "1s"},
		{"demo", "--dsn", dsn},
	} {
		r := c.run(t, args...)
		if r.code != 5 {
			t.Fatalf("exit code %d, want 5\n%s", r.code, r)
		}
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Fatalf("the password appears in the output\n%s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, "127.0.0.1") {
			t.Fatalf("the error does not name the server\n%s", r)
		}
	}
	// Through the environment too.
	r := leasectl{dir: t.TempDir(), dsn: dsn}.run(t, "list", "-o", "json")
	if r.code != 5 || strings.Contains(r.stdout+r.stderr, password) {
		t.Fatalf("via LEASESTORE_DSN:\n%s", r)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir()}
	r := c.run(t, "demo")
	if r.code != 0 {
		t.Fatalf("demo failed\n%s", r)
	}
	for _, want := range []string{"fresh SQLite file", "stale_token", "expired", "REFUSED", "revoked", "Summary", "audit trail"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q\n%s", want, r)
		}
	}
	// The demo leaves the working directory alone.
	if entries, _ := os.ReadDir(c.dir); len(entries) != 0 {
		t.Errorf("demo wrote into the working directory: %v", entries)
	}
}

func TestDemoPostgres(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir()}
	// A TTL above the default, as cli's TestDemo: with the default 1s a
	// renewal delayed by a loaded machine (CI, 2026-12-05: "worker-3 lost
	// shard-c: ... not renewed before it would run out by the local
	// clock") loses a lease the story keeps. TestDemo runs the default.
	m := c.runJSON(t, 0, "demo", "--dsn", pgtest.MigratedDSN(t), "--ttl", "3s")
	if m["status"] != "ok" || m["backend"] != "postgres" || len(m["records"].([]any)) < 8 {
		t.Fatalf("demo on postgres: %v", m)
	}
}

func TestAuditFollowInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "follow.db")}
	result(t, c.runJSON(t, 0, "acquire", "first", "--owner", "w"), "acquired")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "audit", "--follow", "--since", "1h", "--interval", "50ms", "-o", "json")
	lines := startLines(t, cmd)
	var cursors []string
	next := func(want string) {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("audit --follow ended early; stderr: %s", cmd.Stderr)
			}
			var page map[string]any
			if err := json.Unmarshal([]byte(line), &page); err != nil {
				t.Fatalf("follow line %q: %v", line, err)
			}
			wantKeys(t, "follow page", page, "status", "records", "next_cursor")
			if !strings.Contains(line, `"key":"`+want+`"`) {
				t.Fatalf("follow line %q lacks key %s", line, want)
			}
			cur, _ := page["next_cursor"].(string)
			if cur == "" {
				t.Fatalf("follow line %q has no cursor to resume from", line)
			}
			cursors = append(cursors, cur)
		case <-ctx.Done():
			t.Fatalf("no follow line for %s; stderr: %s", want, cmd.Stderr)
		}
	}
	next("first")
	result(t, c.runJSON(t, 0, "acquire", "second", "--owner", "w"), "acquired")
	next("second")
	// Resuming from the first line's cursor reads exactly what followed it.
	rest := c.runJSON(t, 0, "audit", "--cursor", cursors[0])
	if recs, _ := rest["records"].([]any); len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0]), "second") {
		t.Fatalf("audit resumed from the first follow line's cursor: %v", rest)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		t.Errorf("unexpected line after the interrupt: %s", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("audit --follow after an interrupt: %v; stderr: %s", err, cmd.Stderr)
	}
}

// A password that equals ordinary data (here "postgres", also the backend's
// name and the owner) must not rewrite stdout: scripts read owners, keys and
// the backend from it. The password stays out of every DSN printed.
func TestPasswordEqualToDataLeavesStdoutIntact(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	withPW := strings.Replace(dsn, "://root@", "://root:postgres@", 1)
	if withPW == dsn {
		t.Skipf("the test DSN %q has no root@ user part to add a password to", dsn)
	}
	c := leasectl{dir: t.TempDir(), dsn: withPW}
	m := c.runJSON(t, 0, "acquire", "pw-key", "--owner", "postgres")
	lease, _ := m["lease"].(map[string]any)
	if lease == nil || lease["owner"] != "postgres" {
		t.Fatalf("acquire JSON %v: the owner was rewritten", m)
	}
	h := c.runJSON(t, 0, "health")
	if h["backend"] != "postgres" {
		t.Fatalf("health JSON %v: the backend was rewritten", h)
	}
	if store, _ := h["store"].(string); strings.Contains(store, ":postgres@") || !strings.Contains(store, "root") {
		t.Fatalf("health store %q: want the DSN with its password masked and its user kept", store)
	}
	r := c.run(t, "get", "pw-key", "--log-level", "debug")
	if strings.Contains(r.stdout+r.stderr, ":postgres@") {
		t.Fatalf("the password appears in a DSN\n%s", r)
	}
}
