package durations_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/durations"
)

// TestParseTooManyDaysIsTooLong: a count of days past what a time.Duration
// holds is refused as too long however many digits it has, as the same
// span in hours is. Past 4294967295 days (the 32 bits the count is read
// in) it was refused as "not a duration: write a number and a unit".
func TestParseTooManyDaysIsTooLong(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"106752d", "4294967296d", "99999999999d", "1d" + "9999999999h"} {
		_, err := durations.Parse(in)
		if err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("Parse(%q) = %v; want an error saying it is too long", in, err)
		}
	}
}
