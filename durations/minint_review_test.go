package durations_test

import (
	"math"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestFormatParseRoundTripsMinDuration: Format's doc says Parse(Format(d))
// is d, and Parse refuses only durations past what a time.Duration holds.
// The most negative time.Duration is held, yet Format writes it in a form
// Parse refuses as too long.
func TestFormatParseRoundTripsMinDuration(t *testing.T) {
	d := time.Duration(math.MinInt64)
	s := durations.Format(d)
	got, err := durations.Parse(s)
	if err != nil || got != d {
		t.Errorf("Parse(Format(%d)) = Parse(%q) = %v, %v; want %v, nil", int64(d), s, got, err, d)
	}
}
