package durations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestParseRefusesBlanks: the one duration grammar (90s, 15m, 1h30m, 2d)
// has no blanks, around a value or in it: " 5s" and "5s " are refused
// with the value to write, by Parse and by ParseTime (whose RFC 3339 times
// and dates never took them), instead of being read as 5s.
func TestParseRefusesBlanks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for in, fix := range map[string]string{
		" 5s": "5s", "5s ": "5s", "\t1h30m\n": "1h30m", " 2d": "2d", " -1s": "-1s", " 0s ": "0s",
	} {
		if d, err := durations.Parse(in); err == nil || !strings.Contains(err.Error(), "blank") || !strings.Contains(err.Error(), `write "`+fix+`"`) {
			t.Errorf("Parse(%q) = %v, %v; want an error naming the blanks and the value to write (%q)", in, d, err, fix)
		}
	}
	for in, fix := range map[string]string{
		" 1h": "1h", "15m ": "15m", " 2026-11-30": "2026-11-30", "2026-11-30T08:00:00Z ": "2026-11-30T08:00:00Z",
	} {
		if got, err := durations.ParseTime(in, now); err == nil || !strings.Contains(err.Error(), "blank") || !strings.Contains(err.Error(), `write "`+fix+`"`) {
			t.Errorf("ParseTime(%q) = %v, %v; want an error naming the blanks and the value to write (%q)", in, got, err, fix)
		}
	}
	// A blank inside a value stays "not a duration"; blanks alone are no
	// value at all.
	for _, in := range []string{"5 s", "1h 30m", " ", "\t"} {
		if _, err := durations.Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}
