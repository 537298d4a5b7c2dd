package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The table of a revoke (or a release) of a lease with a lock-delay says
// when acquires are refused as the store will refuse them. A revoke ends
// the lease now, so the key is kept until now plus the delay (the
// conflict's "free at"), not until the lease's former expiry plus the
// delay; a release frees the key at once. The table printed "acquires
// wait until EXPIRES+DELAY if it is revoked or runs out" after either: for
// a 1h lease with a 1h lock-delay, an hour later than the revoke keeps the
// key, and a wait that never comes after a release.
func TestRevokeAndReleaseTablesTellTheLockDelayAsItStands(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	if o := runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "1h", "--lock-delay", "1h"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	before := time.Now()
	o := runCLI(t, e, "revoke", "k", "--reason", "stuck")
	if o.code != 0 {
		t.Fatalf("revoke: %+v", o)
	}
	if strings.Contains(o.stdout, "if it is revoked or runs out") {
		t.Errorf("revoke's table speaks of the lock-delay as if the lease were still live:\n%s", o.stdout)
	}
	if m := regexp.MustCompile(`lock-delay .*until (\S+)`).FindStringSubmatch(o.stdout); m != nil {
		until, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("revoke's lock-delay line: %v\n%s", err, o.stdout)
		}
		if limit := before.Add(time.Hour + time.Minute); until.After(limit) {
			t.Errorf("revoke's table says acquires wait until %s, but the revoke keeps the key until about %s (revoke time + 1h):\n%s",
				until.Format(time.RFC3339), before.Add(time.Hour).Format(time.RFC3339), o.stdout)
		}
	}
	// What the store says: the conflict's free-at is the revoke's time plus the delay.
	c := runCLI(t, e, "acquire", "k", "--owner", "w2")
	if c.code != 3 || !strings.Contains(c.stdout, "lock-delay: ") {
		t.Fatalf("acquire after the revoke: %+v", c)
	}

	if o := runCLI(t, e, "acquire", "r", "--owner", "w1", "--ttl", "1h", "--lock-delay", "1h"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	o = runCLI(t, e, "release", "r", "--owner", "w1", "--token", "2")
	if o.code != 0 {
		t.Fatalf("release: %+v", o)
	}
	if strings.Contains(o.stdout, "acquires wait until") {
		t.Errorf("release's table says acquires wait, but a release by the holder frees the key at once:\n%s", o.stdout)
	}
}
