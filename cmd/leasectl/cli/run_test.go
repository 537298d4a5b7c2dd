package cli

import (
	"strings"
	"testing"
	"time"
)

// run with the request id of a lease that ended (released by the run that
// took it, or expired) exits 4, naming the key and the fix: a new
// --request-id (operator-guide.md: "Once the lease ended, the ID answers
// 4: use a new one"). It printed only "not_found: no live lease" and the
// request id.
func TestRunRequestIDOfAnEndedLease(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "run", "rk", "--owner", "w", "--request-id", "myid1", "--", "true"), ExitOK)
	wantCode(t, runCLI(t, e, "acquire", "ek", "--owner", "w", "--ttl", "50ms", "--request-id", "myid2"), ExitOK)
	time.Sleep(100 * time.Millisecond)
	for _, c := range []struct{ key, id, ttl, status string }{
		{"rk", "myid1", "30s", "not_found"},
		{"ek", "myid2", "50ms", "expired"},
	} {
		args := []string{"run", c.key, "--owner", "w", "--ttl", c.ttl, "--request-id", c.id, "--", "sh", "-c", "echo ran"}
		o := runCLI(t, e, args...)
		wantCode(t, o, ExitRefused)
		for _, want := range []string{c.status, "default/" + c.key, c.id, "new --request-id"} {
			if !strings.Contains(o.stdout, want) {
				t.Errorf("%q: stdout %q lacks %q", args, o.stdout, want)
			}
		}
		if strings.Contains(o.stdout, "ran") {
			t.Errorf("%q ran CMD", args)
		}
		j := runCLI(t, e, append([]string{"-o", "json"}, args...)...)
		wantCode(t, j, ExitRefused)
		m := j.json(t)
		if msg, _ := m["message"].(string); m["status"] != c.status || !strings.Contains(msg, "default/"+c.key) ||
			!strings.Contains(msg, "new --request-id") {
			t.Errorf("%q -o json: %v, want status %s and a message naming the key and a new --request-id", args, m, c.status)
		}
	}
}
