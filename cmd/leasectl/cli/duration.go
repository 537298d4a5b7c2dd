package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDuration reads a duration as Go writes one (90s, 1h30m, 250ms) or
// with a leading count of days (2d, 1d12h). A number without a unit, or a
// unit Go does not know, is refused with the forms that would work.
func parseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	neg := strings.HasPrefix(in, "-")
	rest := strings.TrimPrefix(in, "-")
	var days time.Duration
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		n, err := strconv.ParseUint(rest[:i], 10, 32)
		if err != nil {
			return 0, durationHint(s)
		}
		days, rest = time.Duration(n)*24*time.Hour, rest[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, durationHint(s)
		}
	}
	if days == 0 && rest == "" {
		return 0, durationHint(s)
	}
	d += days
	if neg {
		d = -d
	}
	return d, nil
}

// durationHint is the error for a duration that does not parse.
func durationHint(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("%q has no unit: write %ss for seconds (or ms, m, h, d)", s, strconv.FormatFloat(n, 'f', -1, 64))
	}
	return fmt.Errorf("%q is not a duration: write a number and a unit, as in 30s, 15m, 36h, 2d or 1h30m", s)
}

// durationFlag is a pflag.Value for durations that takes what
// parseDuration takes.
type durationFlag struct{ d *time.Duration }

// newDurationFlag sets *d to def and returns a flag value writing to d.
func newDurationFlag(d *time.Duration, def time.Duration) *durationFlag {
	*d = def
	return &durationFlag{d: d}
}

func (f *durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (f *durationFlag) Type() string { return "duration" }
