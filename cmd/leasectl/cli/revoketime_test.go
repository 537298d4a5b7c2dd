package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// The table of a revoke says when its lock-delay ends as the store set it:
// the revoke's time by the store's clock (its audit record's) plus the
// delay, the time a get's not_found gives as the ended lease's expires_at
// plus its lock_delay. Not this machine's clock at printing time: that is
// off by the clocks' skew, and for a replayed revoke (a retry with the same
// --request-id) by the time since the revoke.
func TestRevokeTableGivesTheStoresEndOfTheLockDelay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "1h", "--lock-delay", "1h"), 0)
	first := runCLI(t, e, "revoke", "k", "--reason", "stuck", "--request-id", "r1")
	wantCode(t, first, 0)
	g := runCLI(t, e, "get", "k", "-o", "json")
	wantCode(t, g, 4)
	l := g.json(t)["lease"].(map[string]any)
	ended, err := time.Parse(time.RFC3339Nano, l["expires_at"].(string))
	if err != nil {
		t.Fatalf("get's ended lease: %v", err)
	}
	want := timeTable(ended.Add(time.Hour))
	until := regexp.MustCompile(`lock-delay .*until (\S+)`)
	time.Sleep(50 * time.Millisecond)
	replay := runCLI(t, e, "revoke", "k", "--reason", "stuck", "--request-id", "r1")
	wantCode(t, replay, 0)
	for _, o := range []struct {
		what string
		out  outcome
	}{{"revoke", first}, {"replayed revoke", replay}} {
		m := until.FindStringSubmatch(o.out.stdout)
		if m == nil || m[1] != want {
			t.Errorf("%s's table: want acquires refused until %s (the store's: get's expires_at %s plus 1h), got:\n%s",
				o.what, want, timeTable(ended), o.out.stdout)
		}
	}
}

// Without the revoke's time (its record was not read), the table names no
// time rather than one of this machine's clock.
func TestRevokeTableWithoutTheRevokesTimeNamesNone(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	l := &protocol.Lease{Key: protocol.Key{Namespace: "default", Name: "k"}, Owner: "w1", Token: 7,
		AcquiredAt: at.Add(-time.Minute), RenewedAt: at.Add(-time.Minute), ExpiresAt: at.Add(time.Hour), LockDelay: time.Hour}
	res := protocol.Result{Op: protocol.OpRevoke, Status: protocol.StatusRevoked, Lease: l}
	out := formatResult(res, "", at, time.Time{})
	if !strings.Contains(out, "lock-delay") || strings.Contains(out, "until") {
		t.Errorf("revoke's table without the revoke's time: want a lock-delay line naming no time:\n%s", out)
	}
	out = formatResult(res, "", at.Add(time.Second), at)
	if !strings.Contains(out, "until "+timeTable(at.Add(time.Hour))+" ") {
		t.Errorf("revoke's table with the revoke's time %s: want the delay to end an hour after it:\n%s", timeTable(at), out)
	}
}
