package cli

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// decimalFlag is a pflag.Value for an integer flag (a token, a limit, a
// count) read in decimal, as leasectl prints such numbers: a leading zero
// is a digit like any other (--token 010 is token 10). pflag's own Int and
// Int64 read a number as Go source does (base 0): 010 is octal 8 and 0x10
// is 16, so a zero-padded --token named another lease's token. Forms other
// than decimal digits with an optional sign are refused when the command
// line is parsed (exit 2).
type decimalFlag[T int | int64] struct{ p *T }

// intVar defines a flag in fs that reads a decimal integer into p (see
// decimalFlag), as fs.IntVar and fs.Int64Var do but for the base.
func intVar[T int | int64](fs *pflag.FlagSet, p *T, name string, def T, usage string) {
	*p = def
	fs.Var(decimalFlag[T]{p}, name, usage)
}

func (f decimalFlag[T]) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.p), 10)
}

func (f decimalFlag[T]) Set(s string) error {
	var zero T
	bits := 64
	if _, ok := any(zero).(int); ok {
		bits = strconv.IntSize
	}
	v, err := strconv.ParseInt(s, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s is out of range", s)
	}
	if err != nil {
		return fmt.Errorf("%q is not a whole number in decimal digits", s)
	}
	*f.p = T(v)
	return nil
}

// Type names the flag's type in help as pflag's IntVar and Int64Var do.
func (f decimalFlag[T]) Type() string { return fmt.Sprintf("%T", *new(T)) }
