package durations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestParseTimeLowercaseOnlyWhereRFC3339AllowsIt: the t between date and
// time and the z offset may be lower case, with fractions and offsets as
// before; a lower-case letter anywhere else is still refused, and the
// refusal quotes what was written.
func TestParseTimeLowercaseOnlyWhereRFC3339AllowsIt(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 1, 2, 14, 4, 5, 500_000_000, time.UTC)
	for _, s := range []string{"2026-01-02t15:04:05.5+01:00", "2026-01-02t14:04:05.5z", "2026-01-02T14:04:05.5Z"} {
		if got, err := durations.ParseTime(s, time.Now()); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"2026-01-02x15:04:05z", "2026-01-02t15:04:05y", "2026-01-02t15:04:05+01:00z", "2026-01-0zt15:04:05z"} {
		if got, err := durations.ParseTime(s, time.Now()); err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("ParseTime(%q) = %v, %v; want an error quoting it", s, got, err)
		}
	}
}
