package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/promobserver"
	"github.com/leasestore/leasestore/protocol"
)

// An http(s) DSN is a served store; its password (leasectl refuses to
// send one, but a user may write it) and the API token are masked.
func TestServedDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"http://127.0.0.1:7070", "https://leases.internal:7070/prefix"} {
		tg, err := parseDSN(dsn)
		if err != nil || !tg.remote || tg.shown != dsn {
			t.Fatalf("parseDSN(%q): %+v, %v", dsn, tg, err)
		}
	}
	tg, err := parseDSN("http://u:s3cretPW@h:7070")
	if err != nil || strings.Contains(tg.shown, "s3cretPW") {
		t.Fatalf("shown %q, %v", tg.shown, err)
	}
	// Two URLs on one JSON line: the first one's port is not a password.
	line := `{"url":"http://127.0.0.1:7070","store":"postgres://root@db:5432/x"}`
	if got := newRedactor().redact(line); got != line {
		t.Fatalf("redact(%s) = %s", line, got)
	}
	r := newRedactor("http://u:s3cretPW@h:7070").with("api-token-0123456789")
	got := r.redact("dial http://u:s3cretPW@h:7070: refused; sent api-token-0123456789; saw https://a:b0gus@x/")
	if strings.Contains(got, "s3cretPW") || strings.Contains(got, "api-token-0123456789") || strings.Contains(got, "b0gus") {
		t.Fatalf("redacted: %q", got)
	}
}

// serve refuses a non-loopback listener without tokens, and bad flags,
// before it opens any store.
func TestServeRefusesBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env{EnvDSN: "sqlite:" + filepath.Join(dir, "never.db")}
	for _, args := range [][]string{
		{"serve", "--listen", "0.0.0.0:7070"},
		{"serve", "--listen", "example.com:7070"},
		{"serve", "--listen", "7070"},
		{"serve", "--tls-cert", "c.pem"},
		{"serve", "--tls-cert", dir + "/none.pem", "--tls-key", dir + "/none.key"},
		{"serve", "--tokens", dir + "/no-such-file"},
		{"serve", "--dsn", "http://127.0.0.1:7070"},
	} {
		o := runCLI(t, e, args...)
		if o.code != ExitUsage || o.stderr == "" {
			t.Errorf("leasectl %v: exit %d, stderr %q; want 2 with a reason", args, o.code, o.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("a refused serve created the store")
	}
	for _, h := range []string{"127.0.0.1", "::1", "localhost", "127.1.2.3"} {
		if !loopback(h) {
			t.Errorf("loopback(%q) = false", h)
		}
	}
	for _, h := range []string{"", "0.0.0.0", "::", "10.0.0.1", "example.com"} {
		if loopback(h) {
			t.Errorf("loopback(%q) = true", h)
		}
	}
}

// serve --audit-retention: the operation metrics count the prunes that
// ran, not the check that the store can prune.
func TestServeRetentionObservesOnlyItsPrunes(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
	tg, err := parseDSN(e[EnvDSN])
	if err != nil {
		t.Fatal(err)
	}
	a := &app{getenv: e.get, log: slog.New(slog.NewTextHandler(io.Discard, nil)), red: newRedactor(), timeout: 5 * time.Second}
	var prunes atomic.Int64
	obs := protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == audit.OpPrune {
			prunes.Add(1)
		}
	})
	s, err := a.openTarget(t.Context(), tg, openOptions{observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close(a)
	stop, err := a.startRetention(t.Context(), s, time.Hour) // prunes at once, then every 6 minutes
	if err != nil {
		t.Fatal(err)
	}
	q := audit.Query{Namespace: "", Ops: []protocol.Op{audit.OpPrune}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := s.audit.ReadAudit(t.Context(), q)
		if err == nil && len(p.Records) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prune record: %+v, %v", p, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n := prunes.Load(); n != 1 {
		t.Fatalf("the observer heard %d prunes; one ran", n)
	}
}

// sweptLine is the background sweep's debug line as leasectl's logger
// writes it at --log-level debug: stamped to the microsecond, level DBG.
var sweptLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{6} DBG lease: swept the rows of ended leases backend=sqlite removed=[1-9]`)

// The background sweep of serve's store logs through leasectl's logger:
// its format, its --log-level, its redaction, the command's stderr. It
// logged to slog.Default (the process's stderr, at info), so --log-level
// debug never showed its lines and a warning of a failed sweep bypassed
// the service's log format. (testSweep only has the sweep come sooner.)
func TestServeSweepLogsThroughLeasectlsLogger(t *testing.T) {
	testSweep = protocol.SweepConfig{Every: 10 * time.Millisecond, Grace: time.Nanosecond}
	t.Cleanup(func() { testSweep = protocol.SweepConfig{} })
	e := sqliteEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		args := []string{"serve", "--listen", "127.0.0.1:0", "-o", "json", "--log-level", "debug"}
		done <- Execute(ctx, args, nil, &stdout, &stderr, e.get)
	}()
	stop := sync.OnceValue(func() int { cancel(); return <-done }) // as SIGINT: serve's exit code
	t.Cleanup(func() { stop() })
	var served serveJSON
	for deadline := time.Now().Add(30 * time.Second); json.Unmarshal([]byte(stdout.String()), &served) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
		}
	}
	remote := env{EnvDSN: served.URL}
	wantCode(t, runCLI(t, remote, "acquire", "k", "--owner", "w", "--ttl", "1ms"), 0)
	// Each operation of the served store may start a sweep; the expired
	// lease's row goes in the first one that runs after it expired, which
	// /metrics then counts.
	for deadline := time.Now().Add(30 * time.Second); !sweptRows(t, served.URL); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the served store swept no row in 30s; serve's stderr:\n%s", stderr.String())
		}
		if o := runCLI(t, remote, "get", "k"); o.code != ExitRefused { // expired, then not_found
			t.Fatalf("get k: exit %d: %s%s", o.code, o.stdout, o.stderr)
		}
	}
	// Serve closes its store, which waits for the sweep in flight: its
	// lines are written by the time serve returns.
	if code := stop(); code != 0 {
		t.Fatalf("serve exit %d after interrupt; stderr: %s", code, stderr.String())
	}
	if !sweptLine.MatchString(stderr.String()) {
		t.Fatalf("serve --log-level debug swept the expired lease's row, but its stderr holds no line matching %s "+
			"in leasectl's format (the sweep logs elsewhere):\n%s", sweptLine, stderr.String())
	}
}

// sweptRows reports whether the /metrics of the store served at url count
// a swept row.
func sweptRows(t *testing.T, url string) bool {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", res.Status, err)
	}
	return sweptMetric.Match(body)
}

// sweptMetric is the swept rows' counter of a SQLite store, past 0.
var sweptMetric = regexp.MustCompile(`(?m)^` + promobserver.SweptRowsTotalName + `\{backend="sqlite"\} [1-9]`)
