// Package nsglob matches namespace globs: the one glob grammar that every
// place naming a set of namespaces shares (protocol.Config.LockDelays,
// leasectl serve --lock-delay NS=D, the NS-GLOB of serve's tokens file),
// so that a glob means the same set of namespaces wherever it is written.
// docs/http-api.md ("Namespace globs") documents it for users.
//
// The grammar is path.Match's, except that nothing is special about '/'
// (namespaces may hold it: "team/a"):
//
//	'*'          any run of characters, '/' included (also none)
//	'?'          any one character, '/' included
//	'[' [ '^' ] { range } ']'
//	             one character of the class ('^': not of it); a range is
//	             c, '\' c, or lo '-' hi
//	'\' c        the character c itself (\*, \?, \[, \\)
//	c            the character c itself
//
// A glob must match the whole namespace. It imports nothing of the project
// and is safe for concurrent use.
package nsglob

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// badPattern is a malformed glob: it matches path.ErrBadPattern, as the
// glob's former matcher's error did.
type badPattern struct{ msg string }

func (e *badPattern) Error() string { return e.msg }
func (e *badPattern) Unwrap() error { return path.ErrBadPattern }

// Validate returns nil when pattern is a well-formed glob, else an error
// naming the glob, what is wrong with it and how to write it. The errors
// match [path.ErrBadPattern]. Every glob that path.Match accepts is well
// formed here too.
func Validate(pattern string) error {
	if msg := check(pattern); msg != "" {
		return &badPattern{msg: fmt.Sprintf("namespace glob %q: %s", pattern, msg)}
	}
	return nil
}

// check returns what is wrong with pattern, or "".
func check(pattern string) string {
	for len(pattern) > 0 {
		var chunk string
		_, chunk, pattern = scanChunk(pattern)
		for len(chunk) > 0 {
			switch chunk[0] {
			case '[':
				chunk = chunk[1:]
				if len(chunk) > 0 && chunk[0] == '^' {
					chunk = chunk[1:]
				}
				for nrange := 0; ; nrange++ {
					if len(chunk) > 0 && chunk[0] == ']' && nrange > 0 {
						chunk = chunk[1:]
						break
					}
					var msg string
					if _, chunk, msg = classChar(chunk); msg != "" {
						return msg
					}
					if chunk[0] == '-' {
						if _, chunk, msg = classChar(chunk[1:]); msg != "" {
							return msg
						}
					}
				}
			case '\\':
				if len(chunk) == 1 {
					return `a trailing \ quotes nothing: write \\ for a \`
				}
				chunk = chunk[2:]
			default:
				chunk = chunk[1:]
			}
		}
	}
	return ""
}

// classChar reads a possibly quoted character of a class from chunk,
// returning it, the rest of chunk (never empty when msg is ""), and what
// is wrong, or "".
func classChar(chunk string) (r rune, rest, msg string) {
	const unclosed = `a [ opens a character class that no ] closes: close it, or write \[ for a [`
	switch {
	case len(chunk) == 0:
		return 0, "", unclosed
	case chunk[0] == '-':
		return 0, "", `a - in a character class stands between two characters (a-z): write \- for a -`
	case chunk[0] == ']':
		return 0, "", `a character class names at least one character, and a range ends in one: write \] for a ]`
	case chunk[0] == '\\':
		chunk = chunk[1:]
		if len(chunk) == 0 {
			return 0, "", unclosed
		}
	}
	r, n := utf8.DecodeRuneInString(chunk)
	if r == utf8.RuneError && n == 1 {
		return 0, "", "a character class holds bytes that are not UTF-8"
	}
	if len(chunk) == n {
		return 0, "", unclosed
	}
	return r, chunk[n:], ""
}

// Shadows reports whether the earlier glob prev matches every namespace
// that glob does, so that, where the first matching glob applies (the
// namespace defaults of the lock-delay), glob never applies: "jobs-*"
// shadows "jobs-eu-*", "jobs-eu" and `jobs\-eu`, "j*" shadows "jobs-?",
// "*" shadows everything. It decides glob inclusion over strings of any
// characters (so it may miss an inclusion that holds only because no
// namespace holds some character, or is that long); for a glob it cannot
// decide (one holding bytes that are not UTF-8, or needing a search
// longer than maxContainWork, which none a person writes does) it tells
// the two plain cases: prev is made of stars alone, or glob is a plain
// namespace that prev matches. Equal globs are for the caller, which
// names them as given twice.
func Shadows(prev, glob string) bool {
	if prev != "" && strings.Trim(prev, "*") == "" {
		return true
	}
	if _, in, ok := contains(prev, glob); ok {
		return in
	}
	return !strings.ContainsAny(glob, `*?[\`) && Match(prev, glob)
}

// Match reports whether namespace matches pattern, the whole of it. A
// malformed pattern (see [Validate]) matches nothing.
func Match(pattern, namespace string) bool {
	if check(pattern) != "" {
		return false
	}
	for len(pattern) > 0 {
		var (
			star  bool
			chunk string
		)
		star, chunk, pattern = scanChunk(pattern)
		if star && chunk == "" {
			return true // a trailing * takes the rest, slashes included
		}
		// The chunk here, unless it is the last and leaves something over.
		if rest, ok := matchChunk(chunk, namespace); ok && (rest == "" || pattern != "") {
			namespace = rest
			continue
		}
		if !star {
			return false
		}
		// After a star: the first later place where the chunk matches. A
		// chunk matches a fixed number of characters, and whatever follows
		// begins with a star, so the first place is as good as any.
		found := false
		for i := 0; i < len(namespace) && !found; {
			_, n := utf8.DecodeRuneInString(namespace[i:])
			i += n
			if rest, ok := matchChunk(chunk, namespace[i:]); ok && (rest == "" || pattern != "") {
				namespace, found = rest, true
			}
		}
		if !found {
			return false
		}
	}
	return namespace == ""
}

// scanChunk splits pattern into the stars it starts with, the run of
// single-character terms after them, and the rest (which starts with a
// star or is empty).
func scanChunk(pattern string) (star bool, chunk, rest string) {
	for len(pattern) > 0 && pattern[0] == '*' {
		pattern = pattern[1:]
		star = true
	}
	inClass := false
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			if i+1 < len(pattern) {
				i++
			}
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '*':
			if !inClass {
				return star, pattern[:i], pattern[i:]
			}
		}
	}
	return star, pattern, ""
}

// matchChunk matches chunk, a well-formed run of single-character terms,
// against the start of s, returning what is left of s.
func matchChunk(chunk, s string) (rest string, ok bool) {
	for len(chunk) > 0 {
		if s == "" {
			return "", false
		}
		switch chunk[0] {
		case '[':
			r, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			chunk = chunk[1:]
			negated := len(chunk) > 0 && chunk[0] == '^'
			if negated {
				chunk = chunk[1:]
			}
			in := false
			for nrange := 0; ; nrange++ {
				if chunk[0] == ']' && nrange > 0 {
					chunk = chunk[1:]
					break
				}
				var lo, hi rune
				lo, chunk, _ = classChar(chunk)
				hi = lo
				if chunk[0] == '-' {
					hi, chunk, _ = classChar(chunk[1:])
				}
				in = in || lo <= r && r <= hi
			}
			if in == negated {
				return "", false
			}
		case '?':
			_, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			chunk = chunk[1:]
		case '\\':
			chunk = chunk[1:]
			fallthrough
		default:
			if chunk[0] != s[0] {
				return "", false
			}
			s, chunk = s[1:], chunk[1:]
		}
	}
	return s, true
}
