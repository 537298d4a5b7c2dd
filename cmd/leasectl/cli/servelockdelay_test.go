package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/protocol"
)

// serve --lock-delay NS=D sets the namespace defaults of the lock-delay
// (protocol.Config.LockDelays) of the store it serves, the first glob
// that matches an acquire's namespace applying when the acquire asks for
// none, as DESIGN.md's "per namespace default" has it. serve had no way to
// set them: only Go programs had.
func TestServeLockDelayDefaults(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncbuf.Buffer
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		args := []string{"serve", "--listen", "127.0.0.1:0", "-o", "json",
			"--lock-delay", "billing=0s", "--lock-delay", "jobs-*=15s", "--lock-delay", "*=1m30s"}
		code = Execute(ctx, args, nil, &stdout, &stderr, e.get)
	}()
	stop := sync.OnceValue(func() int { cancel(); <-done; return code })
	t.Cleanup(func() { stop() })
	var served serveJSON
	for deadline := time.Now().Add(30 * time.Second); json.Unmarshal([]byte(stdout.String()), &served) != nil ||
		served.Status != "serving"; time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("serve exited %d:\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
		}
	}
	remote := env{EnvDSN: served.URL}
	for _, c := range []struct {
		key  string
		args []string
		want any // the lease's lock_delay; nil: none
	}{
		{"jobs-eu/k", nil, "15s"},
		{"jobs-eu/asked", []string{"--lock-delay", "5s"}, "5s"}, // the acquire's own wins
		{"billing/k", nil, nil},
		{"default/k", nil, "1m30s"},
		// Namespaces may hold a slash (printed %2F): "*" and "jobs-*"
		// reach them as well, as in the tokens file.
		{"team%2Fa/k", nil, "1m30s"},
		{"jobs-eu%2Fwest/k", nil, "15s"},
	} {
		o := runCLI(t, remote, append([]string{"acquire", c.key, "--owner", "w", "-o", "json"}, c.args...)...)
		wantCode(t, o, ExitOK)
		l, _ := o.json(t)["lease"].(map[string]any)
		if got := l["lock_delay"]; got != c.want {
			t.Errorf("acquire %s %v through serve: lock_delay %v, want %v", c.key, c.args, got, c.want)
		}
	}
	// The default is in force: after a revoke, the key is kept.
	wantCode(t, runCLI(t, remote, "revoke", "jobs-eu/k", "--reason", "test"), ExitOK)
	wantCode(t, runCLI(t, remote, "acquire", "jobs-eu/k", "--owner", "w2"), ExitConflict)
	if code := stop(); code != 0 {
		t.Fatalf("serve exit %d after interrupt; stderr: %s", code, stderr.String())
	}
}

// serve refuses a malformed --lock-delay (exit 2, naming the flag) before
// it opens the store.
func TestServeRefusesBadLockDelays(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env{EnvDSN: "sqlite:" + filepath.Join(dir, "never.db")}
	for _, v := range []string{"15s", "=15s", "jobs=", "jobs=15", "jobs=2h", "jobs=-1s", "jobs[=15s", "jobs=soon"} {
		o := runCLI(t, e, "serve", "--listen", "127.0.0.1:0", "--lock-delay", v)
		if o.code != ExitUsage || !strings.Contains(o.stderr, "--lock-delay") || strings.Contains(o.stderr, "unknown flag") {
			t.Errorf("serve --lock-delay %q: exit %d, stderr %q; want 2 naming --lock-delay", v, o.code, o.stderr)
		}
	}
	o := runCLI(t, e, "serve", "--listen", "127.0.0.1:0", "--lock-delay", "jobs=1s", "--lock-delay", "jobs=2s")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "jobs") {
		t.Errorf("serve with one namespace glob given twice: exit %d, stderr %q; want 2 naming it", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("a refused serve created the store")
	}
}

// serve refuses a --lock-delay entry that can never apply because an
// earlier glob matches every namespace it does (the first matching glob
// applies): any entry after '*', which matches every namespace, a plain
// namespace an earlier glob matches, and a narrower glob after a wider
// one. Exit 2, naming both entries,
// before the store opens.
func TestServeRefusesLockDelaysThatCanNeverApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env{EnvDSN: "sqlite:" + filepath.Join(dir, "never.db")}
	for _, c := range [][2]string{
		{"*=15s", "jobs=1s"},
		{"*=15s", "jobs-*=1s"},
		{"*=15s", "**=1s"},
		{"*=15s", "j?bs=0s"},
		{"*=15s", "a/*=1s"},
		{"*=15s", "[^a]*=1s"},
		{"jobs-*=15s", "jobs-eu=0s"},
		{"team/*=15s", "team/a=0s"},
		{"jobs-*=15s", "jobs-eu-*=1s"},
		{"j*=15s", "jobs-?=1s"},
	} {
		// A serve that took the entries serves until interrupted.
		o := runCLIFor(t, 3*time.Second, e, "serve", "--listen", "127.0.0.1:0", "--lock-delay", c[0], "--lock-delay", c[1])
		if o.code != ExitUsage || !strings.Contains(o.stderr, c[0]) || !strings.Contains(o.stderr, c[1]) {
			t.Errorf("serve --lock-delay %s --lock-delay %s: exit %d, stderr %q; want 2 naming both", c[0], c[1], o.code, o.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("a refused serve created the store")
	}
	// Entries that can apply are taken: a namespace before a glob that
	// matches it, and a glob after a narrower one.
	for _, c := range [][]string{
		{"jobs-eu=0s", "jobs-*=15s", "*=1m"},
		{"team/a=0s", "team/*=15s", "*=1m"},
		{"jobs-*=15s", "jobs=0s"},
	} {
		var delays []protocol.NamespaceLockDelay
		f := lockDelaysFlag{delays: &delays}
		for _, v := range c {
			if err := f.Set(v); err != nil {
				t.Errorf("--lock-delay %v: %s refused: %v", c, v, err)
			}
		}
	}
}
