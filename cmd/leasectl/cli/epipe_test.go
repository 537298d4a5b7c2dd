package cli

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"
)

// closedPipe is a stdout whose reader went away (audit --follow | head).
type closedPipe struct{}

func (closedPipe) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// audit --follow and audit export whose stdout is closed stop and exit
// 141, as DESIGN.md pins for "stdout closed" (and as a process ended by
// SIGPIPE does), not 0: nobody read what they printed.
func TestAuditWithItsStdoutClosedExits141(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	for _, args := range [][]string{
		{"audit", "--follow", "--since", "1h", "--interval", "20ms"},
		{"audit", "export"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stderr bytes.Buffer
		code := Execute(ctx, args, nil, closedPipe{}, &stderr, e.get)
		cancel()
		if code != ExitStdoutClosed {
			t.Errorf("%v with its stdout closed: exit %d, want %d; stderr:\n%s", args, code, ExitStdoutClosed, stderr.String())
		}
	}
}
