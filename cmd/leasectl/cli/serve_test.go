package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
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
