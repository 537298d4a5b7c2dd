package durations_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestParseExtremes: Parse takes every time.Duration, the most negative
// one included, written with days or without, and refuses one past either
// end as too long; Format writes each in the grammar, days first.
func TestParseExtremes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"-106751d23h47m16.854775808s", math.MinInt64},
		{"-2562047h47m16.854775808s", math.MinInt64},
		{"-106751d23h47m16.854775807s", math.MinInt64 + 1},
		{"106751d23h47m16.854775807s", math.MaxInt64},
		{"2562047h47m16.854775807s", math.MaxInt64},
	} {
		if got, err := durations.Parse(c.in); err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %d", c.in, got, err, int64(c.want))
		}
	}
	for _, in := range []string{"106751d23h47m16.854775808s", "2562047h47m16.854775808s",
		"-106751d23h47m16.854775809s", "-2562047h47m16.854775809s", "-106752d", "-1d2562047h"} {
		if got, err := durations.Parse(in); err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("Parse(%q) = %v, %v; want an error saying it is too long", in, got, err)
		}
	}
	if got, want := durations.Format(math.MinInt64), "-106751d23h47m16.854775808s"; got != want {
		t.Errorf("Format(math.MinInt64) = %q; want %q", got, want)
	}
	for _, d := range []time.Duration{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, -day - 1, -time.Nanosecond} {
		if got, err := durations.Parse(durations.Format(d)); err != nil || got != d {
			t.Errorf("Parse(Format(%d)) = %v, %v", int64(d), got, err)
		}
	}
}

const day = 24 * time.Hour
