package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The scanner's durations take leasectl's grammar (package durations):
// days too, and the form that would work when a unit is missing; its
// refusals write durations the same way.
func TestFlagsTakeTheOneDurationGrammar(t *testing.T) {
	t.Setenv("LEASESTORE_DSN", "")
	c, err := parse([]string{"-dsn", "sqlite:x.db", "-ttl", "1d", "-scan-every", "1m30s"}, &strings.Builder{})
	if err != nil || c.ttl != 24*time.Hour || c.scanEvery != 90*time.Second {
		t.Fatalf("-ttl 1d -scan-every 1m30s: ttl %v, scan every %v, error %v; want 24h0m0s, 1m30s and none", c.ttl, c.scanEvery, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-dsn", "sqlite:x.db", "-ttl", "15"}, "15s"},
		{[]string{"-dsn", "sqlite:x.db", "-ttl", "8d"}, "-ttl: 8d is outside [1ms, 7d]"},
		{[]string{"-dsn", "sqlite:x.db", "-scan-every", "-1m"}, "-scan-every: -1m must be positive"},
	} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and an error saying %q", c.args, code, stderr.String(), c.want)
		}
	}
}
