package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/protocol"
)

// An interrupted wait (acquire --wait, run --wait) on a key that the
// lock-delay of a revoked lease keeps says so, as a wait that ran out
// does: the lease it carries has ended, it is not held "until" anything,
// and its table shows the ended lease and when acquires stop answering
// conflict, not a lock-delay that would apply "if it is revoked or runs
// out".
func TestInterruptedWaitShowsTheLockDelay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "holder", "--lock-delay", "1h"), ExitOK)
	wantCode(t, runCLI(t, e, "revoke", "k", "--reason", "test"), ExitOK)
	for _, args := range [][]string{
		{"acquire", "k", "--owner", "w", "--wait"},
		{"run", "k", "--owner", "w", "--wait", "--", "true"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			o := runCLIInterruptedOnLog(t, "waiting: ", e, append([]string{"-o", "json"}, args...)...)
			wantCode(t, o, ExitInterrupted)
			m := o.json(t)
			msg, _ := m["message"].(string)
			l, _ := m["lease"].(map[string]any)
			if m["status"] != StatusInterrupted || l == nil || l["owner"] != "holder" {
				t.Fatalf("interrupted wait printed %v, want status interrupted with the ended lease", m)
			}
			if !strings.HasPrefix(msg, protocol.LockDelayPrefix) || strings.Contains(msg, "held by") ||
				!strings.Contains(msg, "stopped waiting") || !strings.Contains(msg, "free at") {
				t.Errorf("interrupted wait on a key kept by a lock-delay: message %q, want it to start %q, say it stopped "+
					"waiting and when the key is free, and not call the ended lease held", msg, protocol.LockDelayPrefix)
			}
			o = runCLIInterruptedOnLog(t, "waiting: ", e, args...)
			wantCode(t, o, ExitInterrupted)
			if out := o.stdout + o.stderr; !strings.Contains(out, "acquires answer conflict until") ||
				strings.Contains(out, "if it is revoked or runs out") || !strings.Contains(out, "(ended ") {
				t.Errorf("interrupted wait on a key kept by a lock-delay shows the lease as live:\n%s", out)
			}
		})
	}
}

// runCLIInterruptedOnLog is runCLI interrupted (as main cancels the context
// on SIGINT) once stderr holds line, a log line the command writes when it
// has reached the state to interrupt (a wait's "waiting: "): an interrupt
// after a fixed time could land while the store was still opening, on a
// loaded machine, and test another path. It fails the test when line does
// not come within 30s.
func runCLIInterruptedOnLog(t *testing.T, line string, e env, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, args, nil, &stdout, &stderr, e.get) }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stderr.String(), line) {
		select {
		case code := <-done:
			t.Fatalf("leasectl %v exited %d before logging %q\nstdout: %s\nstderr: %s", args, code, line, stdout.String(), stderr.String())
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("leasectl %v: no %q on stderr within 30s\nstdout: %s\nstderr: %s", args, line, stdout.String(), stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	code := <-done
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
