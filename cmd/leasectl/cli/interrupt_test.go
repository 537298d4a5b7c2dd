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
