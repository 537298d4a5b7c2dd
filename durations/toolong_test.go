package durations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// TestParseTooLongWithoutDays: a duration past what a time.Duration holds
// is refused as too long whatever its units, as a count of days past it
// is. Written in hours or minutes, it was refused as "not a duration:
// write a number and a unit", which it is (--ttl 9999999999h, --timeout
// 300000000m).
func TestParseTooLongWithoutDays(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"2562048h", "9999999999h", "300000000m", "10000000000s", "1d2562048h"} {
		_, err := durations.Parse(in)
		if err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("Parse(%q) = %v; want an error saying it is too long", in, err)
		}
		if _, err := durations.ParseTime(in, time.Now()); err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("ParseTime(%q) = %v; want an error saying it is too long", in, err)
		}
	}
}
