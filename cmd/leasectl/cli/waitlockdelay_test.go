package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// acquire --wait that gives up (--wait-timeout) while the lock-delay of a
// revoked lease keeps the key answers the store's verdict: a conflict kept
// by the lock-delay (its message starting "lock-delay: "), shown as the
// ended lease it is, not as a live holder "until" its end, nor as a lease
// whose lock-delay would apply only "if it is revoked or runs out".
func TestAcquireWaitGivingUpShowsTheLockDelay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "holder", "--lock-delay", "1h"), ExitOK)
	wantCode(t, runCLI(t, e, "revoke", "k", "--reason", "test"), ExitOK)

	o := runCLI(t, e, "acquire", "k", "--owner", "waiter", "--wait", "--wait-timeout", "100ms", "-o", "json")
	wantCode(t, o, ExitConflict)
	m := o.json(t)
	msg, _ := m["message"].(string)
	if !strings.HasPrefix(msg, protocol.LockDelayPrefix) || !strings.Contains(msg, "gave up waiting") {
		t.Errorf("acquire --wait run out on a key kept by a lock-delay: message %q, want it to start %q and say it gave up waiting",
			msg, protocol.LockDelayPrefix)
	}

	o = runCLI(t, e, "acquire", "k", "--owner", "waiter", "--wait", "--wait-timeout", "100ms")
	wantCode(t, o, ExitConflict)
	if !strings.Contains(o.stdout, "acquires answer conflict until") || strings.Contains(o.stdout, "if it is revoked or runs out") ||
		!strings.Contains(o.stdout, "ended") {
		t.Errorf("acquire --wait run out on a key kept by a lock-delay shows the lease as live:\n%s", o.stdout)
	}
}

// The log line of a wait that sleeps on a key kept by the lock-delay of a
// revoked lease says so and when the key is free, not that the key is
// held until the ended lease's end.
func TestWaitLogsTheLockDelay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "holder", "--lock-delay", "1h"), ExitOK)
	wantCode(t, runCLI(t, e, "revoke", "k", "--reason", "test"), ExitOK)
	// Long enough for the wait to log before it gives up on a loaded
	// machine (100ms was not, now and then, under CI's load).
	for _, args := range [][]string{
		{"acquire", "k", "--owner", "w", "--wait", "--wait-timeout", "1s"},
		{"run", "k", "--owner", "w", "--wait", "--wait-timeout", "1s", "--", "true"},
	} {
		o := runCLI(t, e, args...)
		wantCode(t, o, ExitConflict)
		if !strings.Contains(o.stderr, "waiting: the key is kept by the lock-delay") || !strings.Contains(o.stderr, "free_at=") ||
			strings.Contains(o.stderr, "the key is held") {
			t.Errorf("%s on a key kept by a lock-delay logged:\n%s\nwant it kept by the lock-delay, with free_at, not held",
				strings.Join(args, " "), o.stderr)
		}
	}
}
