package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A command whose context is cancelled before it has an answer exits 130
// with status interrupted, in JSON as in tables.
func TestInterruptedCommand(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := Execute(ctx, []string{"acquire", "k", "-o", "json"}, nil, &stdout, &stderr, e.get)
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
	wantCode(t, o, ExitInterrupted)
	if m := o.json(t); m["status"] != StatusInterrupted || !strings.Contains(m["message"].(string), "interrupted") {
		t.Fatalf("interrupted acquire printed %v", m)
	}
	stdout.Reset()
	stderr.Reset()
	code = Execute(ctx, []string{"get", "k"}, nil, &stdout, &stderr, e.get)
	if code != ExitInterrupted || !strings.Contains(stderr.String(), "interrupted") || strings.Contains(stderr.String(), "timeout") {
		t.Fatalf("interrupted get: exit %d, stderr %q", code, stderr.String())
	}
	if ExitCode(StatusInterrupted) != ExitInterrupted {
		t.Fatalf("ExitCode(%q) = %d", StatusInterrupted, ExitCode(StatusInterrupted))
	}
}

// An interrupted wait (acquire --wait, run --wait: Ctrl-C or SIGTERM while
// the key is held) exits 130 with status interrupted, as every exit 130
// says, keeping the holder in lease. It printed status conflict and exited
// 130.
func TestInterruptedWait(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "hw", "--owner", "holder", "--ttl", "1h"), ExitOK)
	for _, args := range [][]string{
		{"acquire", "hw", "--owner", "w", "--wait"},
		{"acquire", "hw", "--owner", "w", "--wait", "--wait-timeout", "1m"},
		{"run", "hw", "--owner", "w", "--wait", "--", "true"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			o := runCLIInterruptedOnLog(t, "waiting: ", e, append([]string{"-o", "json"}, args...)...)
			wantCode(t, o, ExitInterrupted)
			m := o.json(t)
			l, _ := m["lease"].(map[string]any)
			if m["status"] != StatusInterrupted || l == nil || l["owner"] != "holder" ||
				!strings.Contains(m["message"].(string), "stopped waiting") {
				t.Fatalf("interrupted wait printed %v, want status interrupted with the holder", m)
			}
			o = runCLIInterruptedOnLog(t, "waiting: ", e, args...)
			wantCode(t, o, ExitInterrupted)
			if !strings.Contains(o.stdout+o.stderr, "interrupted") || strings.Contains(o.stdout+o.stderr, "conflict") {
				t.Fatalf("interrupted wait in a table: stdout %q stderr %q, want interrupted, not conflict", o.stdout, o.stderr)
			}
		})
	}
}
