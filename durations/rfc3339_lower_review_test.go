package durations_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestParseTimeTakesLowercaseRFC3339: ParseTime reads "an RFC 3339 time".
// RFC 3339 (section 5.6, NOTE) lets the "T" and "Z" be lower case, and
// tools print them so (some JSON encoders, `date` formats); ParseTime
// refuses them as "not ... an RFC 3339 time".
func TestParseTimeTakesLowercaseRFC3339(t *testing.T) {
	want := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, s := range []string{"2026-01-02t15:04:05z", "2026-01-02t15:04:05Z", "2026-01-02T15:04:05z"} {
		got, err := durations.ParseTime(s, time.Now())
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v, nil", s, got, err, want)
		}
	}
}
