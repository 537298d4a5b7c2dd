package cli

import (
	"time"

	"github.com/leasestore/leasestore/internal/durations"
)

// parseDuration reads a duration in the grammar the CLI and the HTTP API
// share (package durations): 90s, 1h30m, 250ms, 2d, 1d12h.
func parseDuration(s string) (time.Duration, error) { return durations.Parse(s) }

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
