//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run's log of a lost lease quotes --grace as the user wrote it, in the
// one duration grammar (DESIGN.md contract v3: 90s, 15m, 1h30m, 2d):
// "kill_after=1m", not Go's "kill_after=1m0s".
func TestRunLossLogWritesTheGraceInTheOneGrammar(t *testing.T) {
	controllingTerminal = filepath.Join(t.TempDir(), "no-tty") // not parallel: the variable is the package's
	t.Cleanup(func() { controllingTerminal = "/dev/tty" })
	e := sqliteEnv(t)
	marker := filepath.Join(t.TempDir(), "started")
	done := make(chan outcome, 1)
	go func() {
		done <- runCLISync(t, e, "run", "job", "--ttl", "1h", "--grace", "1m", "--", "sh", "-c", `: > "$0"; exec sleep 300`, marker)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantCode(t, runCLI(t, e, "revoke", "job", "--reason", "stuck"), ExitOK)
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end within 30s of the revoke")
	}
	wantCode(t, o, 6)
	if !strings.Contains(o.stderr, "kill_after=") {
		t.Fatalf("run's log does not say when it kills the command:\nstdout: %s\nstderr: %s", o.stdout, o.stderr)
	}
	if strings.Contains(o.stderr, "kill_after=1m0s") || !strings.Contains(o.stderr, "kill_after=1m") {
		t.Errorf("run's log of the loss quotes --grace 1m as Go writes it, not in the one grammar (want kill_after=1m):\n%s", o.stderr)
	}
}
