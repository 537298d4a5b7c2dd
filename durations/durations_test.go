package durations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

func TestParse(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{
		"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour,
		"0s": 0, "0d": 0, "0d30s": 30 * time.Second, "-1s": -time.Second, "106751d": 106751 * 24 * time.Hour, "250ms": 250 * time.Millisecond, "15m": 15 * time.Minute,
	}
	for in, want := range good {
		if got, err := durations.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// 213504 days is 2^64 ns and 25m26s: the days must not wrap.
	bad := map[string]string{"213504d": "106751d", "106752d": "106751d", "-213504d": "106751d", "106751d24h": "106751d",
		"5": "5s", "1.5": "1.5s", "0": "0s", "-0": "no unit", "1d0": "30s", "soon": "30s", "d": "30s", "1d-2h": "30s", "": "30s", "3x": "30s"}
	for in, hint := range bad {
		if _, err := durations.Parse(in); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("Parse(%q) = %v; want an error suggesting %s", in, err, hint)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	good := map[string]time.Time{
		"1d": now.Add(-24 * time.Hour), "0s": now, "15m": now.Add(-15 * time.Minute), "1h30m": now.Add(-90 * time.Minute),
		"2026-11-30":                time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-11-30T08:00:00Z":      time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		"2026-11-30T09:00:00+01:00": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		"":                          {},
	}
	for in, want := range good {
		if got, err := durations.ParseTime(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-1h", "2026-13-01", "0", "5"} {
		if _, err := durations.ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
	if _, err := durations.ParseTime("yesterday", now); err == nil || !strings.Contains(err.Error(), "2026-01-02") {
		t.Errorf("ParseTime(yesterday) = %v; want an error showing the forms", err)
	}
}

// TestParseTimeBareNumber: a bare number (0, 5) is refused with the
// duration it may have meant, as Parse refuses it. ParseTime took "0" as now.
func TestParseTimeBareNumber(t *testing.T) {
	t.Parallel()
	for in, hint := range map[string]string{"0": "write 0s", "5": "write 5s"} {
		if _, err := durations.ParseTime(in, time.Now()); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("ParseTime(%q) = %v; want an error saying %s", in, err, hint)
		}
	}
}

// TestParseTimeTooLong: a duration back from now past what a
// time.Duration holds is refused as too long, as Parse refuses it, not
// with the message of a string that is no duration at all.
func TestParseTimeTooLong(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"9999999d", "106752d", "106751d24h"} {
		if _, err := durations.ParseTime(in, time.Now()); err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("ParseTime(%q) = %v; want an error saying it is too long", in, err)
		}
	}
}

// Format writes what Parse reads, days as a leading count, without Go's
// trailing zero units.
func TestFormat(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", time.Millisecond: "1ms", 90 * time.Second: "1m30s", time.Hour: "1h", 90 * time.Minute: "1h30m",
		24 * time.Hour: "1d", 36 * time.Hour: "1d12h", 7 * 24 * time.Hour: "7d", 24*time.Hour + 30*time.Second: "1d30s",
		-36 * time.Hour: "-1d12h", 1<<63 - 1: "106751d23h47m16.854775807s",
	} {
		got := durations.Format(d)
		if got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
		if back, err := durations.Parse(got); err != nil || back != d {
			t.Errorf("Parse(Format(%v)) = %v, %v", d, back, err)
		}
	}
}
