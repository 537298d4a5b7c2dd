package main

// End-to-end tests of leasectl serve: a real process on a real port, on
// SQLite and on PostgreSQL, driven with plain HTTP requests and with
// leasectl itself through --dsn http://.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// server is a running leasectl serve.
type server struct {
	url     string
	cmd     *exec.Cmd
	stderr  *syncbuf.Buffer
	exited  chan struct{} // closed when the process ended; exitErr is set then
	exitErr error
}

// startServe starts leasectl serve on the store dsn with args, waits for
// the line it prints once it listens, and stops it when the test ends.
func startServe(t testing.TB, dir, dsn string, env []string, args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "-o", "json"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	s := &server{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, out)
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case line := <-first:
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["status"] != "serving" {
			t.Fatalf("serve did not start: %q\nstderr: %s", line, s.stderr)
		}
		s.url = m["url"].(string)
	case <-time.After(time.Minute):
		t.Fatalf("serve printed nothing in a minute; stderr: %s", s.stderr)
	}
	return s
}

// stop sends SIGTERM and returns the exit code.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		t.Fatalf("serve did not stop within a minute of SIGTERM; stderr: %s", s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

// httpClient sends one request per connection, so no idle connection
// outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

type answer struct {
	code int
	body map[string]any
	raw  string
}

// call sends one request; headers are name, value pairs.
func call(t *testing.T, method, url, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{code: resp.StatusCode, raw: string(raw)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v\n%s", method, url, err, raw)
		}
	}
	return a
}

// want checks an answer's code and status and returns the body.
func (a answer) want(t *testing.T, what string, code int, status string) map[string]any {
	t.Helper()
	if a.code != code || a.body["status"] != status {
		t.Fatalf("%s: HTTP %d %v, want HTTP %d %q\n%s", what, a.code, a.body["status"], code, status, a.raw)
	}
	return a.body
}

const (
	e2eReader = "e2e-reader-token-000000"
	e2eWriter = "e2e-writer-token-000000"
	e2eAdmin  = "e2e-admin-token-0000000"
)

// writeTokens writes a tokens file in dir and returns its path.
func writeTokens(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const e2eTokens = `# e2e tokens
` + e2eReader + ` reader e2e,other
` + e2eWriter + ` writer e2e
` + e2eAdmin + ` admin *
`

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// Every leasectl command through a served store: the same checks as
// against the database itself, with backend "http".
func TestServeExerciseSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "served.db"), nil)
	exercise(t, leasectl{dir: dir, dsn: s.url}, "http")
}

func TestServeExercisePostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, pgtest.MigratedDSN(t), nil)
	exercise(t, leasectl{dir: dir, dsn: s.url}, "http")
}

// apiRoutes drives every route and code of DESIGN.md's HTTP API with plain
// HTTP against a served store that requires tokens.
func apiRoutes(t *testing.T, s *server) {
	u := s.url
	w, r, a := bearer(e2eWriter), bearer(e2eReader), bearer(e2eAdmin)
	post := func(path, body string, h []string, extra ...string) answer {
		return call(t, "POST", u+path, body, append(append([]string{}, h...), extra...)...)
	}

	// Two racing acquires of one key: one 200, one 409.
	var wg sync.WaitGroup
	race := make([]answer, 2)
	for i := range race {
		wg.Go(func() {
			race[i] = post("/v1/acquire", fmt.Sprintf(`{"namespace":"e2e","key":"race","owner":"racer-%d","ttl":"1m"}`, i), w)
		})
	}
	wg.Wait()
	if codes := []int{race[0].code, race[1].code}; !(codes[0] == 200 && codes[1] == 409 || codes[0] == 409 && codes[1] == 200) {
		t.Fatalf("racing acquires answered %v, want one 200 and one 409\n%s\n%s", codes, race[0].raw, race[1].raw)
	}
	won, lost := race[0].body, race[1].body
	if race[0].code != 200 {
		won, lost = lost, won
	}
	if won["status"] != "acquired" || lost["status"] != "conflict" ||
		fmt.Sprint(lost["lease"].(map[string]any)["token"]) != fmt.Sprint(won["lease"].(map[string]any)["token"]) {
		t.Fatalf("race bodies: %v / %v", won, lost)
	}
	lease := won["lease"].(map[string]any)
	owner, tok := lease["owner"].(string), int64(lease["token"].(float64))

	// get (a key with a slash, too), list, renew, release, revoke.
	post("/v1/acquire", `{"namespace":"e2e","key":"10.0.0.0/24","owner":"o","ttl":"1m"}`, w).want(t, "acquire slash", 200, "acquired")
	call(t, "GET", u+"/v1/leases/e2e/10.0.0.0/24", "", r...).want(t, "get slash", 200, "found")
	call(t, "GET", u+"/v1/leases/e2e/race", "", r...).want(t, "get", 200, "found")
	call(t, "GET", u+"/v1/leases/e2e/nothing", "", r...).want(t, "get missing", 404, "not_found")
	l := call(t, "GET", u+"/v1/leases/e2e?limit=1", "", r...).want(t, "list", 200, "found")
	if len(l["leases"].([]any)) != 1 || l["next_cursor"] == "" {
		t.Fatalf("list page: %v", l)
	}
	l2 := call(t, "GET", u+"/v1/leases/e2e?limit=1&cursor="+l["next_cursor"].(string), "", r...).want(t, "list page 2", 200, "found")
	if len(l2["leases"].([]any)) != 1 {
		t.Fatalf("list page 2: %v", l2)
	}
	renew := fmt.Sprintf(`{"namespace":"e2e","key":"race","owner":%q,"token":%d,"ttl":"2m"}`, owner, tok)
	post("/v1/renew", renew, w, "Idempotency-Key", "renew-1").want(t, "renew", 200, "renewed")
	again := post("/v1/renew", renew, w, "Idempotency-Key", "renew-1").want(t, "renew replay", 200, "renewed")
	if again["replayed"] != true || again["request_id"] != "renew-1" {
		t.Fatalf("replayed renew: %v", again)
	}
	post("/v1/renew", strings.Replace(renew, owner, "intruder", 1), w).want(t, "not owner", 409, "not_owner")
	post("/v1/revoke", `{"namespace":"e2e","key":"race","actor":"oncall","reason":"e2e"}`, a).want(t, "revoke", 200, "revoked")
	post("/v1/revoke", `{"namespace":"e2e","key":"race","actor":"oncall","reason":"e2e"}`, a).want(t, "revoke again", 404, "not_found")
	post("/v1/acquire", `{"namespace":"e2e","key":"race","owner":"next","ttl":"1m"}`, w).want(t, "acquire after revoke", 200, "acquired")
	post("/v1/renew", renew, w).want(t, "stale", 409, "stale_token")
	post("/v1/release", fmt.Sprintf(`{"namespace":"e2e","key":"race","owner":%q,"token":%d}`, owner, tok), w).
		want(t, "stale release", 409, "stale_token")

	// expired (410): the holder of a short lease renews after it ran out.
	short := post("/v1/acquire", `{"namespace":"e2e","key":"short","owner":"o","ttl":"50ms"}`, w).want(t, "short", 200, "acquired")
	shortRenew := fmt.Sprintf(`{"namespace":"e2e","key":"short","owner":"o","token":%v,"ttl":"1m"}`, short["lease"].(map[string]any)["token"])
	deadline := time.Now().Add(30 * time.Second)
	for {
		ans := post("/v1/renew", shortRenew, w)
		if ans.code == 410 {
			ans.want(t, "expired", 410, "expired")
			break
		}
		ans.want(t, "renew before expiry", 200, "renewed")
		if time.Now().After(deadline) {
			t.Fatal("the 50ms lease never expired")
		}
		// The renew set the ttl to 1m: take a fresh short lease.
		post("/v1/release", strings.Replace(shortRenew, `,"ttl":"1m"`, "", 1), w).want(t, "release short", 200, "released")
		short = post("/v1/acquire", `{"namespace":"e2e","key":"short","owner":"o","ttl":"50ms"}`, w).want(t, "short", 200, "acquired")
		shortRenew = fmt.Sprintf(`{"namespace":"e2e","key":"short","owner":"o","token":%v,"ttl":"1m"}`, short["lease"].(map[string]any)["token"])
		time.Sleep(100 * time.Millisecond) // time must pass on the store's clock; nothing signals it
	}
	post("/v1/release", strings.Replace(shortRenew, `,"ttl":"1m"`, "", 1), w).want(t, "release expired", 410, "expired")

	// audit
	au := call(t, "GET", u+"/v1/audit?namespace=e2e&key=race&limit=100", "", r...).want(t, "audit", 200, "found")
	var ops []string
	for _, rec := range au["records"].([]any) {
		ops = append(ops, rec.(map[string]any)["op"].(string))
	}
	if got := strings.Join(ops, ","); got != "acquire,renew,revoke,acquire" {
		t.Fatalf("audit of race: %s", got)
	}

	// 400, 413, 401, 403, 404, 405
	post("/v1/acquire", `{"namespace":"e2e","key":"k",`, w).want(t, "malformed", 400, "invalid")
	post("/v1/acquire", `{"namespace":"e2e","key":"k","owner":"o","ttl":"1m","lease":"please"}`, w).want(t, "unknown field", 400, "invalid")
	post("/v1/acquire", `{"namespace":"e2e","key":"k","owner":"o","ttl":"1m","request_id":"`+strings.Repeat("x", 70_000)+`"}`, w).
		want(t, "too large", 413, "invalid")
	post("/v1/acquire", `{"namespace":"e2e","key":"k","owner":"o","ttl":"1m"}`, nil).want(t, "no token", 401, "unauthorized")
	post("/v1/acquire", `{"namespace":"e2e","key":"k","owner":"o","ttl":"1m"}`, bearer("e2e-unknown-token-0000")).want(t, "unknown token", 401, "unauthorized")
	post("/v1/acquire", `{"namespace":"e2e","key":"k","owner":"o","ttl":"1m"}`, r).want(t, "reader writes", 403, "forbidden")
	post("/v1/acquire", `{"namespace":"other","key":"k","owner":"o","ttl":"1m"}`, w).want(t, "writer elsewhere", 403, "forbidden")
	post("/v1/revoke", `{"namespace":"e2e","key":"k","actor":"a","reason":"r"}`, w).want(t, "writer revokes", 403, "forbidden")
	call(t, "GET", u+"/v1/audit", "", r...).want(t, "reader audits all", 403, "forbidden")
	call(t, "GET", u+"/v1/leases/e2e/k", "", nil...).want(t, "get without token", 401, "unauthorized")
	call(t, "GET", u+"/v2/nothing", "", r...).want(t, "unknown route", 404, "invalid")
	call(t, "DELETE", u+"/v1/leases/e2e/k", "", a...).want(t, "method", 405, "invalid")

	// probes, metrics, the OpenAPI document
	call(t, "GET", u+"/healthz", "").want(t, "healthz", 200, "ok")
	call(t, "GET", u+"/readyz", "").want(t, "readyz", 200, "healthy")
	m := call(t, "GET", u+"/metrics", "")
	for _, want := range []string{`leasestore_http_requests_total{code="409",method="POST",route="acquire"}`,
		`leasestore_operations_total{backend=`, "go_goroutines"} {
		if m.code != 200 || !strings.Contains(m.raw, want) {
			t.Fatalf("/metrics lacks %s:\n%.2000s", want, m.raw)
		}
	}
	doc := call(t, "GET", u+"/openapi.json", "")
	if doc.code != 200 || doc.body["openapi"] != "3.1.0" {
		t.Fatalf("/openapi.json: %d %.200s", doc.code, doc.raw)
	}

	// No token in the logs.
	logs := s.stderr.String()
	for _, tok := range []string{e2eReader, e2eWriter, e2eAdmin} {
		if strings.Contains(logs, tok) {
			t.Fatalf("serve logged a token:\n%s", logs)
		}
	}
}

func TestServeHTTPAPISQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "api.db"), nil, "--tokens", writeTokens(t, dir, e2eTokens))
	apiRoutes(t, s)
}

func TestServeHTTPAPIPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := pgtest.MigratedDSN(t)
	s := startServe(t, dir, dsn, nil, "--tokens", writeTokens(t, dir, e2eTokens))
	apiRoutes(t, s)

	// 504: the table is locked, so the acquire outlives its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE leasestore_leases IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	call(t, "POST", s.url+"/v1/acquire", `{"namespace":"e2e","key":"locked","owner":"o","ttl":"1m"}`,
		append(bearer(e2eWriter), "Request-Timeout", "300ms")...).want(t, "locked table", 504, "timeout")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// 503: the store cannot serve (its table is gone from under it).
	if _, err := conn.Exec(ctx, "ALTER TABLE leasestore_leases RENAME TO leasestore_leases_away"); err != nil {
		t.Fatal(err)
	}
	call(t, "POST", s.url+"/v1/acquire", `{"namespace":"e2e","key":"gone","owner":"o","ttl":"1m"}`, bearer(e2eWriter)...).
		want(t, "no table", 503, "unavailable")
	if _, err := conn.Exec(ctx, "ALTER TABLE leasestore_leases_away RENAME TO leasestore_leases"); err != nil {
		t.Fatal(err)
	}
	call(t, "GET", s.url+"/readyz", "").want(t, "readyz after repair", 200, "healthy")
}

// shutdownUnderLoad stops a served store while writers acquire and checks
// that serve exits 0 and every acquire it acknowledged is in the store
// and its audit trail afterwards, read through the database's own DSN.
func shutdownUnderLoad(t *testing.T, dir, dsn string) {
	s := startServe(t, dir, dsn, nil)
	type ack struct{ key, requestID, token string }
	var (
		mu   sync.Mutex
		acks []ack
		n    atomic.Int64
		wg   sync.WaitGroup
	)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	enough := make(chan struct{})
	var once sync.Once
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key, id := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("load-%d-%d", w, i)
				body := fmt.Sprintf(`{"namespace":"load","key":%q,"owner":"w%d","ttl":"1h","request_id":%q}`, key, w, id)
				resp, err := client.Post(s.url+"/v1/acquire", "application/json", strings.NewReader(body))
				if err != nil {
					return // the server is gone: unacknowledged
				}
				var m map[string]any
				err = json.NewDecoder(resp.Body).Decode(&m)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || m["status"] != "acquired" {
					if resp.StatusCode == 503 {
						return
					}
					t.Errorf("acquire %s: HTTP %d %v %v", key, resp.StatusCode, m, err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{key, id, fmt.Sprint(m["lease"].(map[string]any)["token"])})
				mu.Unlock()
				if n.Add(1) == 100 {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	select {
	case <-enough:
	case <-workersDone:
		t.Fatalf("the writers stopped before 100 acquires; stderr: %s", s.stderr)
	case <-time.After(2 * time.Minute):
		t.Fatalf("100 acquires did not finish in two minutes; stderr: %s", s.stderr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM; stderr: %s", code, s.stderr)
	}
	wg.Wait()
	if !strings.Contains(s.stderr.String(), "shutting down") {
		t.Fatalf("serve did not log its shutdown: %s", s.stderr)
	}

	// Read back through the database, paging.
	c := leasectl{dir: dir, dsn: dsn}
	held := map[string]string{}
	for cursor := ""; ; {
		args := []string{"list", "-n", "load", "--limit", "1000"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		page := c.runJSON(t, 0, args...)
		for _, l := range page["leases"].([]any) {
			lm := l.(map[string]any)
			held[lm["key"].(string)] = fmt.Sprint(lm["token"])
		}
		if cursor, _ = page["next_cursor"].(string); cursor == "" {
			break
		}
	}
	recorded := map[string]bool{}
	for cursor := ""; ; {
		args := []string{"audit", "-n", "load", "--limit", "1000"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		page := c.runJSON(t, 0, args...)
		for _, r := range page["records"].([]any) {
			recorded[r.(map[string]any)["request_id"].(string)] = true
		}
		if cursor, _ = page["next_cursor"].(string); cursor == "" {
			break
		}
	}
	for _, a := range acks {
		if held[a.key] != a.token || !recorded[a.requestID] {
			t.Fatalf("acknowledged acquire %+v: store holds token %q, audit has it: %v", a, held[a.key], recorded[a.requestID])
		}
	}
	t.Logf("%d acknowledged acquires, all in the store and its audit trail; %d leases held", len(acks), len(held))
}

func TestServeShutdownUnderLoadSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shutdownUnderLoad(t, dir, "sqlite:"+filepath.Join(dir, "load.db"))
}

func TestServeShutdownUnderLoadPostgres(t *testing.T) {
	t.Parallel()
	shutdownUnderLoad(t, t.TempDir(), pgtest.MigratedDSN(t))
}

// TestServeBadTokensFileMessage: a tokens file that does not parse is
// refused (exit 2, no store opened) with one message naming the file and
// the line. It said "tokens: tokens: line 2: ..." for a file named tokens.
func TestServeBadTokensFileMessage(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.dir, "tokens"), []byte("0123456789abcdef-reader reader *\nshort reader *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"tokens":  "leasectl: tokens file \"tokens\": line 2: token: shorter than 16 characters\n",
		"missing": "leasectl: tokens file \"missing\": no such file or directory\n",
	} {
		r := c.run(t, "serve", "--tokens", file, "--dsn", "sqlite:never.db")
		if r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Errorf("want exit 2 and stderr %q\n%s", want, r)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dir, "never.db")); err == nil {
		t.Error("a refused serve created the store")
	}
}

// Without --tokens serve listens only on loopback.
func TestServeRefusesOpenListenerWithoutTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "open.db")}
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r := c.run(t, "serve", "--listen", addr)
		if r.code != 2 || !strings.Contains(r.stderr, "--tokens") {
			t.Fatalf("serve --listen %s without --tokens:\n%s", addr, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "open.db")); err == nil {
		t.Fatal("the refused serve created the store")
	}
	// With tokens it listens everywhere.
	s := startServe(t, dir, c.dsn, nil, "--listen", "0.0.0.0:0", "--tokens", writeTokens(t, dir, e2eTokens))
	if !strings.HasPrefix(s.url, "http://0.0.0.0:") && !strings.HasPrefix(s.url, "http://[::]:") {
		t.Fatalf("url %s", s.url)
	}
}

// SIGHUP reloads the tokens file; a file that does not parse leaves the
// tokens in force.
func TestServeReloadsTokensOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeTokens(t, dir, e2eTokens)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "hup.db"), nil, "--tokens", path)
	get := func(tok string) int { return call(t, "GET", s.url+"/v1/leases/e2e", "", bearer(tok)...).code }
	if get(e2eReader) != 200 {
		t.Fatal("reader refused before the reload")
	}
	hup := func(logLine string, count int) {
		t.Helper()
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for strings.Count(s.stderr.String(), logLine) < count {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP: %s", logLine, s.stderr)
			}
			time.Sleep(10 * time.Millisecond) // the log line is the signal; poll for it
		}
	}
	const fresh = "e2e-fresh-token-0000000"
	// A stream opened with the token the reload removes ends at the
	// reload, with status unauthorized.
	stream, err := http.NewRequest("GET", s.url+"/v1/notify/e2e/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	stream.Header.Set("Authorization", "Bearer "+e2eReader)
	resp, err := http.DefaultClient.Do(stream)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream with the reader's token: %v %v", resp, err)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
	}()
	writeTokens(t, dir, fresh+" reader *\n")
	hup("tokens reloaded", 1)
	if get(e2eReader) != 401 || get(fresh) != 200 {
		t.Fatalf("after the reload: old token %d, new token %d", get(e2eReader), get(fresh))
	}
	var seen []string
	timeout := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case line, ok := <-events:
			if !ok {
				ended = true
				break
			}
			seen = append(seen, line)
		case <-timeout:
			t.Fatalf("the removed token's stream still runs 10s after the reload: %q", seen)
		}
	}
	if got := strings.Join(seen, "\n"); !strings.Contains(got, "event: end") || !strings.Contains(got, `"status":"unauthorized"`) {
		t.Fatalf("the removed token's stream ended with %q, want an end event of status unauthorized", got)
	}
	writeTokens(t, dir, "this line is not a token line\n")
	hup("does not load", 1)
	if get(fresh) != 200 {
		t.Fatal("a broken tokens file replaced the tokens in force")
	}
}

// HTTPS with HTTP/2, and leasectl as a client of it with a token.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "serve")
	cert, key := ca.Server(t)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "tls.db"), nil,
		"--tls-cert", cert, "--tls-key", key, "--tokens", writeTokens(t, dir, e2eTokens))
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("url %s", s.url)
	}
	pemBytes, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(s.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("GET /healthz over TLS: %s %s", resp.Status, resp.Proto)
	}

	c := leasectl{dir: dir, dsn: s.url}
	// Without the CA in SSL_CERT_FILE the certificate is not trusted:
	// unavailable (exit 5), saying so and naming SSL_CERT_FILE.
	untrusted := c.command(t.Context(), "acquire", "tls-key", "-n", "e2e", "--owner", "w", "-o", "json")
	untrusted.Env = append(untrusted.Env, "LEASESTORE_API_TOKEN="+e2eWriter)
	r := finish(t, untrusted, untrusted.Args, untrusted.Run())
	if r.code != 5 || !strings.Contains(r.stdout, "TLS certificate is not trusted") || !strings.Contains(r.stdout, "SSL_CERT_FILE") {
		t.Fatalf("acquire over https without the CA: want exit 5, the certificate not trusted, naming SSL_CERT_FILE:\n%s", r)
	}
	env := func(extra ...string) *exec.Cmd {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		cmd := c.command(ctx, "acquire", "tls-key", "-n", "e2e", "--owner", "w", "-o", "json")
		cmd.Env = append(cmd.Env, append([]string{"SSL_CERT_FILE=" + ca.CertFile}, extra...)...)
		return cmd
	}
	cmd := env("LEASESTORE_API_TOKEN=" + e2eWriter)
	r = finish(t, cmd, cmd.Args, cmd.Run())
	if r.code != 0 {
		t.Fatalf("acquire over https:\n%s", r)
	}
	result(t, r.obj(t), "acquired")
	// A reader's token is refused: forbidden (exit 7, not 5: a bad token
	// is not an outage), saying why and naming the variable, and the token
	// never shows; no token at all is unauthorized (exit 7), and so is a
	// list through failWith's path.
	for _, tc := range []struct {
		env    []string
		args   []string
		status string
	}{
		{[]string{"LEASESTORE_API_TOKEN=" + e2eReader}, nil, "forbidden"},
		{nil, nil, "unauthorized"},
		{[]string{"LEASESTORE_API_TOKEN=e2e-unknown-token-0000"}, []string{"list", "-n", "e2e", "-o", "json"}, "unauthorized"},
		{[]string{"LEASESTORE_API_TOKEN=" + e2eReader}, []string{"list", "-n", "billing", "-o", "json"}, "forbidden"},
	} {
		cmd = env(tc.env...)
		if tc.args != nil {
			cmd.Args = append([]string{cmd.Args[0]}, append(tc.args, "--dsn", s.url)...)
		}
		r = finish(t, cmd, cmd.Args, cmd.Run())
		if r.code != 7 || r.obj(t)["status"] != tc.status || !strings.Contains(r.stdout, "LEASESTORE_API_TOKEN") ||
			strings.Contains(r.stdout+r.stderr, e2eReader) {
			t.Fatalf("%v with %v: want exit 7, status %s, naming LEASESTORE_API_TOKEN:\n%s", cmd.Args[1:], tc.env, tc.status, r)
		}
	}
}

// TestServedHealthChecksTheToken: health through a served store asks
// for the store's readiness and makes one authenticated call, so a bad
// token fails it as it fails every other command (exit 7, naming
// LEASESTORE_API_TOKEN), and a reader token of one namespace passes. It
// printed healthy, exit 0, for any token: /readyz takes none.
func TestServedHealthChecksTheToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "health.db"), nil, "--tokens", writeTokens(t, dir, e2eTokens+
		"e2e-one-namespace-reader reader billing\n"))
	c := leasectl{dir: dir, dsn: s.url}
	health := func(token string, args ...string) run {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := c.command(ctx, append([]string{"health"}, args...)...)
		if token != "" {
			cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+token)
		}
		return finish(t, cmd, cmd.Args[1:], cmd.Run())
	}
	for _, tc := range []struct{ token, status string }{{"e2e-unknown-token-0000", "unauthorized"}, {"", "unauthorized"}} {
		r := health(tc.token, "-o", "json")
		if r.code != 7 || r.obj(t)["status"] != tc.status || !strings.Contains(r.stdout, "LEASESTORE_API_TOKEN") {
			t.Errorf("health with token %q: want exit 7, status %s, naming LEASESTORE_API_TOKEN:\n%s", tc.token, tc.status, r)
		}
	}
	if r := health("e2e-unknown-token-0000"); r.code != 7 || !strings.Contains(r.stderr, "LEASESTORE_API_TOKEN") || strings.Contains(r.stdout, "healthy") {
		t.Errorf("health with a bad token (table): want exit 7 naming LEASESTORE_API_TOKEN:\n%s", r)
	}
	for _, tok := range []string{e2eReader, "e2e-one-namespace-reader", e2eAdmin} {
		if r := health(tok, "-o", "json"); r.code != 0 || r.obj(t)["status"] != "healthy" {
			t.Errorf("health with a good token: want exit 0, healthy:\n%s", r)
		}
	}
}

// A password in an http DSN never shows.
func TestServedDSNPasswordIsRedacted(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: "http://user:s3cr3t-pass@127.0.0.1:1"}
	for _, args := range [][]string{{"get", "k"}, {"get", "k", "-o", "json"}, {"health", "--log-level", "debug"}} {
		r := c.run(t, args...)
		if r.code == 0 || strings.Contains(r.stdout+r.stderr, "s3cr3t-pass") {
			t.Fatalf("leasectl %v with a password in an http DSN:\n%s", args, r)
		}
	}
}

// TestServeShutdownEndsNotifyStreams: a notification stream lasts until
// its client goes away, yet SIGTERM stops serve at once, well within
// --shutdown-timeout: the stream gets its end event and serve exits 0
// without cutting requests off.
func TestServeShutdownEndsNotifyStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "notify.db"), nil, "--shutdown-timeout", "1m")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/notify/e2e/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("notify: HTTP %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "event: subscribed\n" {
		t.Fatalf("first line %q (%v)", line, err)
	}
	start := time.Now()
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM; stderr: %s", code, s.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("serve took %v to stop with a notification stream open", took)
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), "event: end\ndata: {\"status\":\"unavailable\"") {
		t.Fatalf("the stream ended without its end event: %q", rest)
	}
	if strings.Contains(s.stderr.String(), "cut off") {
		t.Fatalf("serve cut requests off: %s", s.stderr)
	}
}

// TestServeParityOverHTTP: through an http DSN, namespaces and list -A
// answer (a token sees the namespaces it may read), and audit --follow
// streams: with --interval 1h, a record committed while it follows arrives
// within seconds, which a poll every hour could not do.
func TestServeParityOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "parity.db"), nil, "--tokens", writeTokens(t, dir, e2eTokens))
	c := leasectl{dir: dir, dsn: s.url}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	command := func(tok string, args ...string) *exec.Cmd {
		cmd := c.command(ctx, append(args, "-o", "json")...)
		cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+tok)
		return cmd
	}
	run := func(tok string, code int, args ...string) map[string]any {
		t.Helper()
		cmd := command(tok, args...)
		r := finish(t, cmd, args, cmd.Run())
		if r.code != code {
			t.Fatalf("%v: exit %d, want %d\n%s", args, r.code, code, r)
		}
		return r.obj(t)
	}
	for _, ns := range []string{"e2e", "other", "billing"} {
		result(t, run(e2eAdmin, 0, "acquire", "k", "-n", ns, "--owner", "w"), "acquired")
	}
	if got := fmt.Sprint(run(e2eAdmin, 0, "namespaces")["namespaces"]); got != "[billing e2e other]" {
		t.Fatalf("namespaces as admin: %s", got)
	}
	if got := fmt.Sprint(run(e2eReader, 0, "namespaces")["namespaces"]); got != "[e2e other]" {
		t.Fatalf("namespaces as a reader of e2e and other: %s", got)
	}
	if n := len(run(e2eAdmin, 0, "list", "-A")["leases"].([]any)); n != 3 {
		t.Fatalf("list -A: %d leases, want 3", n)
	}

	follow := command(e2eAdmin, "audit", "--follow", "-A", "--since", "1h", "--interval", "1h")
	lines := startLines(t, follow)
	wait := func(key string) {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok || !strings.Contains(line, `"key":"`+key+`"`) || !strings.Contains(line, `"next_cursor":"a1.`) {
				t.Fatalf("audit --follow: line %q (open: %v), want the record of %s; stderr: %s", line, ok, key, follow.Stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("audit --follow -A --interval 1h: no record of %s within 10s (polling?); stderr: %s", key, follow.Stderr)
		}
	}
	for range 3 {
		wait("k")
	}
	result(t, run(e2eWriter, 0, "acquire", "later", "-n", "e2e", "--owner", "w"), "acquired")
	wait("later")
	_ = follow.Process.Signal(os.Interrupt)
	for range lines {
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("audit --follow after an interrupt: %v; stderr: %s", err, follow.Stderr)
	}
}

// TestServedStoreRefusesDatabaseCommands: gc, audit prune, migrate and fencing raise
// need the database's own DSN. Through an http DSN each is refused as a
// usage error (exit 2) naming the DSN to use, never exit 5: the store
// answered, and a retry cannot help.
func TestServedStoreRefusesDatabaseCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "db.db"), nil)
	c := leasectl{dir: dir, dsn: s.url}
	for _, args := range [][]string{{"gc"}, {"audit", "prune", "--before", "1d", "--yes"}, {"migrate", "status"}, {"fencing", "raise"}} {
		r := c.run(t, append(args, "-o", "json")...)
		m := r.obj(t)
		if r.code != 2 || m["status"] != "invalid" || !strings.Contains(m["message"].(string), "the DSN leasectl serve was given") {
			t.Fatalf("%v through %s: exit %d, want 2 (invalid) naming the database's DSN\n%s", args, s.url, r.code, r)
		}
	}
}

// TestServeWithoutTokensAnswersOnlyLoopbackNames: serve without --tokens
// refuses a request addressed to another name (a web page that rebound its
// name to 127.0.0.1), 403, and answers loopback names; with --tokens the
// bearer token guards it and any name is answered.
func TestServeWithoutTokensAnswersOnlyLoopbackNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	get := func(url, host string, headers ...string) int {
		req, err := http.NewRequest("GET", url+"/v1/leases/default", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host, req.Close = host, true
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	open := startServe(t, dir, "sqlite:"+filepath.Join(dir, "open.db"), nil)
	if code := get(open.url, "rebound.example"); code != http.StatusForbidden {
		t.Fatalf("serve without --tokens answered Host rebound.example with %d, want 403", code)
	}
	if code := get(open.url, "localhost"); code != http.StatusOK {
		t.Fatalf("serve without --tokens answered Host localhost with %d, want 200", code)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("reader-token-0123456789 reader *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	guarded := startServe(t, dir, "sqlite:"+filepath.Join(dir, "guarded.db"), nil, "--tokens", tokens)
	if code := get(guarded.url, "leases.example", "Authorization", "Bearer reader-token-0123456789"); code != http.StatusOK {
		t.Fatalf("serve with --tokens answered Host leases.example with %d, want 200", code)
	}
}

// TestServedBenchRefusedExits7: bench against a served store that refuses
// its operations (no token, an unknown one, a reader's for a workload that
// writes, a writer's outside its namespaces) stops and exits 7 naming the
// refusal and LEASESTORE_API_TOKEN, like every other command; it printed
// "status":"ok" with errors equal to ops and exited 0. A token allowed the
// workload still benches, exit 0.
func TestServedBenchRefusedExits7(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "bench.db"), nil, "--tokens", writeTokens(t, dir, e2eTokens))
	c := leasectl{dir: dir, dsn: s.url}
	bench := func(token string, args ...string) run {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		args = append([]string{"bench", "--duration", "1s", "--warm-up", "0s", "-c", "2", "--keys", "4", "-o", "json"}, args...)
		cmd := c.command(ctx, args...)
		if token != "" {
			cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+token)
		}
		return finish(t, cmd, cmd.Args[1:], cmd.Run())
	}
	for _, tc := range []struct {
		token  string
		args   []string
		status string
	}{
		{"", []string{"-n", "e2e"}, "unauthorized"},
		{"e2e-unknown-token-0000", []string{"-n", "e2e"}, "unauthorized"},
		{e2eReader, []string{"-n", "e2e"}, "forbidden"},
		{e2eReader, []string{"-n", "e2e", "--op", "mixed"}, "forbidden"},
		{e2eWriter, []string{"-n", "billing"}, "forbidden"},
		{e2eWriter, []string{"-n", "billing", "--op", "renew"}, "forbidden"},
	} {
		r := bench(tc.token, tc.args...)
		if r.code != 7 || r.obj(t)["status"] != tc.status || !strings.Contains(r.stdout, "LEASESTORE_API_TOKEN") {
			t.Errorf("bench %v with token %q: want exit 7, status %s, naming LEASESTORE_API_TOKEN:\n%s", tc.args, tc.token, tc.status, r)
		}
	}
	if r := bench(e2eWriter, "-n", "e2e"); r.code != 0 || r.obj(t)["status"] != "ok" || r.obj(t)["errors"] != float64(0) {
		t.Errorf("bench with a writer's token in its namespace: want exit 0, no errors:\n%s", r)
	}
}

// A tokens file saved with a UTF-8 byte order mark (as some Windows
// editors save it) serves its first token, at start and at reload: the
// mark made that token an unknown one, with nothing said.
func TestServeTokensFileWithByteOrderMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const bom = "\uFEFF"
	path := writeTokens(t, dir, bom+e2eReader+" reader e2e\n"+e2eAdmin+" admin *\n")
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "bom.db"), nil, "--tokens", path)
	call(t, "GET", s.url+"/v1/leases/e2e", "", bearer(e2eReader)...).want(t, "the first token of a file with a BOM", 200, "found")

	const fresh = "e2e-fresh-token-0000000"
	writeTokens(t, dir, bom+fresh+" reader e2e\n")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.stderr.String(), "tokens reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP: %s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond) // the log line is the signal; poll for it
	}
	call(t, "GET", s.url+"/v1/leases/e2e", "", bearer(fresh)...).want(t, "the first token of a reloaded file with a BOM", 200, "found")
}

// serve refuses a certificate that expired, or is not valid yet (exit 2,
// naming the file and the date), before it opens the store: every client
// would refuse it.
func TestServeRefusesCertificateOutOfDate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-time.Hour), "expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)},
		{"future", now.Add(time.Hour), now.Add(48 * time.Hour), "not valid before " + now.Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		cert, key := testca.New(t, tc.name).ServerValid(t, tc.from, tc.to)
		// A serve that starts runs until the deadline: a minute, not run's two.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := []string{"serve", "--dsn", "sqlite:never.db", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key}
		cmd := leasectl{dir: dir}.command(ctx, args...)
		r := finish(t, cmd, args, cmd.Run())
		cancel()
		if r.code != 2 || !strings.Contains(r.stderr, cert) || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%s certificate: want exit 2 and stderr naming %s and %q\n%s", tc.name, cert, tc.want, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("a refused serve created the store")
	}
}
