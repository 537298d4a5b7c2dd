// Package durations reads the one duration grammar and the one time
// grammar that leasectl's flags and the HTTP API share (DESIGN.md,
// contract v3), so that what a user types on the command line is what a
// request body or query may say:
//
//   - a duration is Go's (90s, 15m, 1h30m, 250ms) with an optional leading
//     count of days (2d, 1d12h); a number without a unit is refused with
//     the form that would work;
//   - a time is RFC 3339 (2026-01-02T15:04:05Z), a UTC date (2026-01-02),
//     or a duration back from now (1h, 2d; 0s is now).
//
// Neither has blanks: a value with blanks around it (" 5s", "5s ") is
// refused naming the value to write, wherever it came from.
//
// A service built on leasestore can take its own flags and settings in the
// same grammar (examples/scanner does). It imports nothing of the project
// and is safe for concurrent use.
package durations

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Parse reads a duration as Go writes one (90s, 1h30m, 250ms) or with a
// leading count of days (2d, 1d12h). A leading minus sign makes it
// negative; callers refuse what they cannot use. A number without a unit,
// or a unit Go does not know, is refused with the forms that would work; a
// duration past what a time.Duration holds (about 292 years), in any
// units, is refused as too long. Blanks around it are refused too,
// naming the value to write.
func Parse(s string) (time.Duration, error) {
	if err := blanks(s, Parse); err != nil {
		return 0, err
	}
	neg := strings.HasPrefix(s, "-")
	rest := strings.TrimPrefix(s, "-")
	var days time.Duration
	hasDays := false
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		n, err := strconv.ParseUint(rest[:i], 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, tooLong(s) // digits only, past 64 bits
		}
		if err != nil {
			return 0, hint(s)
		}
		if n > maxDays {
			return 0, tooLong(s)
		}
		days, rest, hasDays = time.Duration(n)*day, rest[i+1:], true
	}
	if rest == "0" {
		// time.ParseDuration takes a bare 0; the grammar writes 0s.
		return 0, hint(s)
	}
	// mag is the duration's size: a negative one reaches one further than
	// a positive one (math.MinInt64, which Format writes too).
	var mag uint64
	if rest != "" {
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, hint(s)
		}
		signed := rest
		if neg {
			signed = "-" + rest // so that time.ParseDuration reaches math.MinInt64
		}
		d, err := time.ParseDuration(signed)
		if err != nil {
			if goDuration.MatchString(rest) {
				// Well written, so time.ParseDuration refused it for
				// overflowing, which its error does not tell apart.
				return 0, tooLong(s)
			}
			return 0, hint(s)
		}
		if neg {
			d = -d // math.MinInt64 stays itself, whose size uint64 holds
		}
		mag = uint64(d)
	}
	if !hasDays && rest == "" {
		return 0, hint(s)
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if mag > limit-uint64(days) {
		return 0, tooLong(s)
	}
	mag += uint64(days)
	d := time.Duration(mag) // math.MinInt64 when mag is 1<<63
	if neg {
		d = -d
	}
	return d, nil
}

// Format writes d in the grammar Parse reads, as a user would write it:
// whole days as a leading count (7d, 1d12h), the rest as Go writes it
// without its trailing zero units (1h30m, 90s as 1m30s, 250ms); 0s for
// zero. Parse(Format(d)) is d. Messages that quote a duration or a limit
// to users write it with Format.
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	out, mag := "", uint64(d)
	if d < 0 {
		out, mag = "-", uint64(-d) // -math.MinInt64 is itself, whose size uint64 holds
	}
	if days := mag / uint64(day); days > 0 {
		out += strconv.FormatUint(days, 10) + "d"
		mag -= days * uint64(day)
		if mag == 0 {
			return out
		}
	}
	s := time.Duration(mag).String() // less than a day
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return out + s
}

// goDuration matches what time.ParseDuration reads, without a sign: one
// or more numbers (with an optional fraction), each followed by a unit.
var goDuration = regexp.MustCompile(`^(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$`)

// day is the unit of the leading count of days; maxDays is the most days a
// time.Duration holds (about 292 years).
const (
	day     = 24 * time.Hour
	maxDays = uint64(math.MaxInt64 / int64(day))
)

// tooLong is the error for a duration past what a time.Duration holds:
// refused, not wrapped round to another one.
func tooLong(s string) error {
	return tooLongError(fmt.Sprintf("%q is too long: a duration is at most %dd (about 292 years)", s, maxDays))
}

// ErrTooLong matches (errors.Is) the error of [Parse] and [ParseTime] for
// a duration past what a time.Duration holds, so that a caller with a
// maximum of its own may cut such a value to it.
var ErrTooLong = errors.New("durations: past what a time.Duration holds")

// tooLongError is tooLong's error, which ParseTime passes on as it is.
type tooLongError string

func (e tooLongError) Error() string { return string(e) }

// Is reports whether target is [ErrTooLong].
func (e tooLongError) Is(target error) bool { return target == ErrTooLong }

// blanks refuses s when blanks (Unicode white space) stand around it,
// naming the value to write, or, when that is refused by parse too, why;
// nil otherwise. Blanks alone are left to parse, which refuses them as no
// value.
func blanks[T any](s string, parse func(string) (T, error)) error {
	in := strings.TrimSpace(s)
	if in == s || in == "" {
		return nil
	}
	if _, err := parse(in); err != nil {
		return fmt.Errorf("%q has blanks around it, and %w", s, err)
	}
	return fmt.Errorf("%q has blanks around it: write %q", s, in)
}

// hint is the error for a duration that does not parse.
func hint(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("%q has no unit: write %ss for seconds (or ms, m, h, d)", s, strconv.FormatFloat(n, 'f', -1, 64))
	}
	return fmt.Errorf("%q is not a duration: write a number and a unit, as in 30s, 15m, 36h, 2d or 1h30m", s)
}

// ParseTime reads a point in time: a duration back from now (15m, 36h,
// 2d; 0s is now; never negative), an RFC 3339 time with any number of
// fraction digits (its T and Z in either case, as RFC 3339 allows:
// 2026-01-02t15:04:05z), or a date (midnight UTC). The empty string is the zero
// time; a bare number (0, 5) is refused with the duration to write, and
// blanks around a value with the value to write. Times are returned in UTC.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if err := blanks(s, func(in string) (time.Time, error) { return ParseTime(in, now) }); err != nil {
		return time.Time{}, err
	}
	d, err := Parse(s)
	if err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %s back from now must not be negative", Format(d))
		}
		return now.Add(-d).UTC(), nil
	}
	if tl, ok := err.(tooLongError); ok {
		return time.Time{}, tl
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Time{}, hint(s)
	}
	if t, err := time.Parse(time.RFC3339Nano, upperTZ(s)); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a duration back from now (15m, 36h, 2d), "+
		"an RFC 3339 time (2026-01-02T15:04:05Z) nor a date (2026-01-02)", s)
}

// upperTZ returns s with an RFC 3339 time's lower-case t (between the
// date and the time) and z (the UTC offset) made upper case, which
// time.Parse wants: RFC 3339 (section 5.6, NOTE) allows either case.
func upperTZ(s string) string {
	if len(s) <= len(time.DateOnly) || s[len(time.DateOnly)] != 't' && !strings.HasSuffix(s, "z") {
		return s
	}
	b := []byte(s)
	if b[len(time.DateOnly)] == 't' {
		b[len(time.DateOnly)] = 'T'
	}
	if b[len(b)-1] == 'z' {
		b[len(b)-1] = 'Z'
	}
	return string(b)
}
