package cli

import (
	"strings"
	"time"

	"github.com/leasestore/leasestore/internal/durations"
)

// parseDuration reads a duration in the grammar the CLI and the HTTP API
// share (package durations): 90s, 1h30m, 250ms, 2d, 1d12h.
func parseDuration(s string) (time.Duration, error) { return durations.Parse(s) }

// durationFlag is a pflag.Value for durations that takes what
// parseDuration takes, and a bare 0 when bareZero is set.
type durationFlag struct {
	d        *time.Duration
	bareZero bool
}

// newDurationFlag sets *d to def and returns a flag value writing to d.
// Like every duration, zero is written with a unit (0s): a bare 0 is
// refused with that form.
func newDurationFlag(d *time.Duration, def time.Duration) *durationFlag {
	*d = def
	return &durationFlag{d: d}
}

// newZeroDurationFlag is newDurationFlag for a flag whose help gives 0 a
// meaning (--wait-timeout 0: no timeout, --lock-delay 0, --audit-retention
// 0): it takes a bare 0 as 0s too.
func newZeroDurationFlag(d *time.Duration, def time.Duration) *durationFlag {
	f := newDurationFlag(d, def)
	f.bareZero = true
	return f
}

func (f *durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	if f.bareZero && strings.TrimSpace(s) == "0" {
		*f.d = 0
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (f *durationFlag) Type() string { return "duration" }
