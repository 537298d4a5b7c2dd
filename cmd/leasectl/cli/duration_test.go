package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{
		"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour,
		"0s": 0, "-1s": -time.Second, "250ms": 250 * time.Millisecond,
	}
	for in, want := range good {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"5": "5s", "1.5": "1.5s", "soon": "30s", "d": "30s", "1d-2h": "30s", "": "30s", "3x": "30s"}
	for in, hint := range bad {
		if _, err := parseDuration(in); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("parseDuration(%q) = %v; want an error suggesting %s", in, err, hint)
		}
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	good := map[string]time.Time{
		"1d": now.Add(-24 * time.Hour), "0s": now, "15m": now.Add(-15 * time.Minute),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-11-30T08:00:00Z": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
	for in, want := range good {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseSince("yesterday", now); err == nil || !strings.Contains(err.Error(), "2026-01-02") {
		t.Errorf("parseSince(yesterday) = %v; want an error showing the forms", err)
	}
}

// The forms an operator types first are accepted end to end.
func TestAuditSinceForms(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
	for _, since := range []string{"1d", "2020-01-01", "0s"} {
		o := runCLI(t, e, "audit", "--since", since, "-o", "json")
		wantCode(t, o, ExitOK)
		n := len(o.json(t)["records"].([]any))
		if (since == "0s") != (n == 0) {
			t.Errorf("audit --since %s: %d records", since, n)
		}
	}
}
