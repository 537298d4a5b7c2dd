package cli

import (
	"strings"
	"testing"
	"time"
)

// A not_owner against a lease that has run out says that it ran out, its
// token and when, never that it is live or held.
func TestNotOwnerOnAnExpiredLeaseSaysItExpired(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "k", "--owner", "alice", "--ttl", "1ms", "-o", "json")
	wantCode(t, acq, ExitOK)
	tok := token(t, acq.json(t))
	expires := lease(t, acq.json(t))["expires_at"].(string)
	exp, _ := time.Parse(time.RFC3339Nano, expires)
	// SQLite judges expiry by this machine's clock: wait until it has passed.
	for time.Now().Before(exp.Add(time.Millisecond)) {
		time.Sleep(time.Until(exp) + time.Millisecond)
	}
	cases := [][]string{
		{"renew", "k", "--owner", "alice", "--token", itoa(tok + 995)},
		{"release", "k", "--owner", "alice", "--token", itoa(tok + 995)},
		{"revoke", "k", "--reason", "r", "--token", itoa(tok + 995)},
		{"renew", "k", "--owner", "bob", "--token", itoa(tok)},
		{"release", "k", "--owner", "bob", "--token", itoa(tok)},
	}
	for _, args := range cases {
		o := runCLI(t, e, append(args, "-o", "json")...)
		wantCode(t, o, ExitRefused)
		m := o.json(t)
		msg, _ := m["message"].(string)
		if m["status"] != "not_owner" {
			t.Fatalf("%v: status %v, want not_owner (%s)", args, m["status"], msg)
		}
		for _, w := range []string{"expired", "token " + itoa(tok), expires} {
			if !strings.Contains(msg, w) {
				t.Errorf("%v on the expired lease: message lacks %q: %s", args, w, msg)
			}
		}
		for _, bad := range []string{"live", "held by", "is held"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%v on the expired lease: message says %q: %s", args, bad, msg)
			}
		}
	}
	// A live lease is still called live.
	live := runCLI(t, e, "acquire", "k2", "--owner", "alice", "-o", "json")
	wantCode(t, live, ExitOK)
	ltok := token(t, live.json(t))
	o := runCLI(t, e, "renew", "k2", "--owner", "alice", "--token", itoa(ltok+5), "-o", "json")
	wantCode(t, o, ExitRefused)
	if msg, _ := o.json(t)["message"].(string); !strings.Contains(msg, "live lease has token "+itoa(ltok)) {
		t.Errorf("renew with a token never issued on a live lease: %s", msg)
	}
}
