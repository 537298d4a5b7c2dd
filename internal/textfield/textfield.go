// Package textfield checks the text fields of the protocol (namespaces, key
// names, owners, request ids, reasons): one rule for every package of the
// module that takes such a field from a user. It imports nothing of the
// module.
package textfield

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Validate checks a protocol text field: non-empty, valid UTF-8, no control
// characters nor invisible formatting characters (Unicode category Cf:
// zero-width spaces, bidirectional overrides), at most max bytes. field
// names the field in the error.
func Validate(field, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s: must not be empty", field)
	case len(s) > max:
		return fmt.Errorf("%s: %d bytes is longer than the limit of %d", field, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s: not valid UTF-8", field)
	}
	// ASCII first, byte by byte: its controls are below 0x20 and 0x7f, and
	// it has no Cf character. Most fields are ASCII, and every request
	// checks several.
	i := 0
	for ; i < len(s) && s[i] < utf8.RuneSelf; i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s: control character %U at byte %d", field, rune(c), i)
		}
	}
	for j, r := range s[i:] {
		i := i + j
		if unicode.IsControl(r) {
			return fmt.Errorf("%s: control character %U at byte %d", field, r, i)
		}
		if unicode.Is(unicode.Cf, r) {
			// Zero-width and bidirectional formatting characters would let
			// two keys look identical in logs and tables.
			return fmt.Errorf("%s: invisible formatting character %U at byte %d", field, r, i)
		}
	}
	return nil
}

// ShellQuote quotes s for a POSIX shell unless it needs no quoting, for
// the commands a message tells its reader to run.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Shown returns s, an owner or an actor, for a message or a column of
// text: as it is, or, when it holds a blank (any Unicode space), a double
// quote, a backslash or a character Go does not print as itself, quoted as
// Go quotes a string (strconv.Quote), so that it reads as one word and
// back to what it was.
func Shown(s string) string {
	for _, r := range s {
		if unicode.IsSpace(r) || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
