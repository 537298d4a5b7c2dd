package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/protocol"
)

// parseDuration reads a duration in the grammar the CLI and the HTTP API
// share (package durations): 90s, 1h30m, 250ms, 2d, 1d12h.
func parseDuration(s string) (time.Duration, error) { return durations.Parse(s) }

// positive, as a flag's least value, makes it take any positive duration.
const positive = time.Nanosecond

// durationFlag is a pflag.Value for durations that takes what
// parseDuration takes within [min, max] (max 0: no bound), and a bare 0
// when bareZero is set. The flag's declaration is the one place that says
// what its command takes: Set refuses the rest when the command line is
// parsed (exit 2, before any store is opened), and a number written
// without a unit is refused with a duration the flag takes.
type durationFlag struct {
	d        *time.Duration
	def      time.Duration
	min, max time.Duration
	bareZero bool
	note     string // said after a refusal: what else to do (renew: leave --ttl out)
	// nonZeroMin, when set, is the least value above zero the flag takes
	// (--lock-delay: 1µs, the resolution lock-delays are kept at).
	nonZeroMin time.Duration
}

// newDurationFlag sets *d to def and returns a flag value writing to d
// that takes durations in [min, max] (max 0: no bound; min positive: any
// positive one). Like every duration, zero is written with a unit (0s): a
// bare 0 is refused with a form to use.
func newDurationFlag(d *time.Duration, def, min, max time.Duration) *durationFlag {
	*d = def
	return &durationFlag{d: d, def: def, min: min, max: max}
}

// newZeroDurationFlag is newDurationFlag for a flag whose help gives 0 a
// meaning (--wait-timeout 0: no timeout, --lock-delay 0, gc --grace 0,
// --audit-retention 0): it takes [0, max] (max 0: no bound), and a bare 0
// as 0s too.
func newZeroDurationFlag(d *time.Duration, def, max time.Duration) *durationFlag {
	f := newDurationFlag(d, def, 0, max)
	f.bareZero = true
	return f
}

// String is the flag's value as help shows it as a default: in the
// grammar leasectl reads (1h, 1h30m, 90s), and "0" for zero, which pflag
// does not print as a default, since every flag whose zero means
// something says what in its own words (renew --ttl: the lease's own TTL).
func (f *durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return shortDuration(*f.d)
}

func (f *durationFlag) Set(s string) error {
	if in := strings.TrimSpace(s); in != s && in != "" {
		// Refused as the grammar refuses it, naming what the flag takes
		// (a bare 0 too, where it takes one).
		var d time.Duration
		g := *f
		g.d = &d
		if err := g.Set(in); err != nil {
			return fmt.Errorf("%q has blanks around it, and %w", s, err)
		}
		return fmt.Errorf("%q has blanks around it: write %q", s, in)
	}
	if f.bareZero && s == "0" {
		*f.d = 0
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		if n, nerr := strconv.ParseFloat(s, 64); nerr == nil && !f.takes(time.Duration(n*float64(time.Second))) {
			// The parser's hint (write Ns) would be refused in turn.
			return fmt.Errorf("%q has no unit: write %s", s, f.wanted())
		}
		return err
	}
	switch {
	case f.takes(d):
		*f.d = d
		return nil
	case d > 0 && d < f.nonZeroMin && f.takes(0):
		return fmt.Errorf("%s is under %s, the resolution lock-delays are kept at (it would be kept as none): write 0 for none, or at least %s",
			shortDuration(d), shortDuration(f.nonZeroMin), shortDuration(f.nonZeroMin))
	case d < 0 && f.min == 0:
		return fmt.Errorf("must not be negative, got %s", shortDuration(d))
	case f.min == positive && f.max == 0:
		return fmt.Errorf("must be positive, got %s", shortDuration(d))
	}
	return fmt.Errorf("%s is outside %s%s", shortDuration(d), f.bounds(), f.note)
}

// newLockDelayFlag is the flag of a lock-delay: 0 (none, or the namespace
// default), or protocol.MinLockDelay to protocol.MaxLockDelay, since a
// lock-delay under the microsecond would be kept as none.
func newLockDelayFlag(d *time.Duration) *durationFlag {
	f := newZeroDurationFlag(d, 0, protocol.MaxLockDelay)
	f.nonZeroMin = protocol.MinLockDelay
	return f
}

// withNote returns f, whose out-of-range refusals end with "; "+note.
func (f *durationFlag) withNote(note string) *durationFlag {
	f.note = "; " + note
	return f
}

func (f *durationFlag) Type() string { return "duration" }

// takes reports whether d is within the flag's bounds.
func (f *durationFlag) takes(d time.Duration) bool {
	return d >= f.min && (f.max == 0 || d <= f.max) && (d == 0 || d >= f.nonZeroMin)
}

// bounds describes the flag's range: "1ms to 7d", "at least 100ms".
func (f *durationFlag) bounds() string {
	switch {
	case f.max > 0:
		return shortDuration(f.min) + " to " + shortDuration(f.max)
	case f.min == positive:
		return "above 0s"
	}
	return "at least " + shortDuration(f.min)
}

// wanted names a duration the flag takes, and the range: "a duration such
// as 30s (1ms to 7d)". The example is the flag's default when that is
// in range and not zero, else 30s brought into range.
func (f *durationFlag) wanted() string {
	ex := f.def
	if ex == 0 || !f.takes(ex) {
		ex = max(30*time.Second, f.min)
		if f.max > 0 {
			ex = min(ex, f.max)
		}
	}
	if f.min == positive && f.max == 0 {
		return "a positive duration such as " + shortDuration(ex)
	}
	return fmt.Sprintf("a duration such as %s (%s)", shortDuration(ex), f.bounds())
}

// shortDuration writes d as the duration grammar reads it and users
// write it (durations.Format): 7d, 1d12h, 1m, 1h30m, 250ms.
func shortDuration(d time.Duration) string { return durations.Format(d) }
