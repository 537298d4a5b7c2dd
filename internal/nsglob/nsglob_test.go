package nsglob

import (
	"errors"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, ns string
		want        bool
	}{
		{"*", "jobs", true},
		{"*", "team/a", true},
		{"*", "a/b/c", true},
		{"*", "", true},
		{"jobs-*", "jobs-eu", true},
		{"jobs-*", "jobs-eu/west", true},
		{"jobs-*", "jobs", false},
		{"team/*", "team/a/b", true},
		{"team/*", "team", false},
		{"*/a", "x/y/a", true},
		{"*/a", "x/y/ab", false},
		{"a*b*c", "a/b/c", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"a*b", "ab/b", true},
		{"billing", "billing", true},
		{"billing", "billing2", false},
		{"billing", "Billing", false},
		{"scan-?", "scan-1", true},
		{"scan-?", "scan-/", true},
		{"scan-?", "scan-é", true},
		{"scan-?", "scan-12", false},
		{"scan-?", "scan-", false},
		{"shard-[0-3]", "shard-2", true},
		{"shard-[0-3]", "shard-7", false},
		{"shard-[^0-3]", "shard-7", true},
		{"shard-[^0-3]", "shard-/", true},
		{"shard-[^0-3]", "shard-2", false},
		{"shard-[ab\\]]", "shard-]", true},
		{"[é-ë]x", "êx", true},
		{`lit\*`, "lit*", true},
		{`lit\*`, "litx", false},
		{`lit\*`, `lit\x`, false},
		{`a\\b`, `a\b`, true},
		{"*é", "cafe/é", true},
		{"*?", "é", true},
		{"*?x", "éx", true},
		{"", "", true},
		{"", "a", false},
		// Malformed globs match nothing, not even their own text.
		{"shard-[", "shard-[", false},
		{`lit\`, `lit\`, false},
	} {
		if got := Match(c.pattern, c.ns); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.ns, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"*", "jobs-*", "team/*", "a?b", "[a-z]", "[^a]", `\*`, `[\]]`, `[\-]`, "[]a]x"[1:], "é*", "", "[z-a]"} {
		if err := Validate(p); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", p, err)
		}
	}
	for _, c := range []struct{ pattern, says string }{
		{"shard-[", `write \[ for a [`},
		{"shard-[a", `write \[ for a [`},
		{"shard-[a-", `write \[ for a [`},
		{`shard-[\`, `write \[ for a [`},
		{"shard-[]", `write \] for a ]`},
		{"shard-[^]", `write \] for a ]`},
		{"shard-[a-]", `write \] for a ]`},
		{"shard-[-a]", `write \- for a -`},
		{`shard-\`, `write \\ for a \`},
		{"a*[", `write \[ for a [`},
		{"[\xff]", "not UTF-8"},
	} {
		err := Validate(c.pattern)
		if err == nil {
			t.Errorf("Validate(%q) = nil, want an error saying %q", c.pattern, c.says)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "namespace glob") ||
			!errors.Is(err, path.ErrBadPattern) {
			t.Errorf("Validate(%q) = %v, want an error naming the glob, saying %q and matching path.ErrBadPattern", c.pattern, err, c.says)
		}
	}
}

// The grammar is path.Match's but for '/': every glob path.Match takes is
// well formed here (and no other), and for a namespace without '/' both
// match alike. With '/', a plain backtracking matcher is the reference.
func TestAgreesWithPathMatch(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const patternAlphabet = `ab/é*?[]^-\`
	const nameAlphabet = "ab/é-]^*?["
	pick := func(alphabet string, n int) string {
		rs := []rune(alphabet)
		var b strings.Builder
		for range n {
			b.WriteRune(rs[rng.IntN(len(rs))])
		}
		return b.String()
	}
	for range 20000 {
		p := pick(patternAlphabet, rng.IntN(7))
		_, pathErr := path.Match(p, "")
		if err := Validate(p); (err == nil) != (pathErr == nil) {
			t.Fatalf("Validate(%q) = %v, path.Match's verdict %v", p, err, pathErr)
		}
		if pathErr != nil {
			continue
		}
		name := pick(nameAlphabet, rng.IntN(6))
		if want := reference(p, name); Match(p, name) != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", p, name, !want, want)
		}
		noSlash := strings.ReplaceAll(name, "/", "")
		if want, _ := path.Match(p, noSlash); Match(p, noSlash) != want {
			t.Fatalf("Match(%q, %q) = %v, path.Match says %v", p, noSlash, !want, want)
		}
	}
}

// reference matches a well-formed pattern by backtracking, one rune at a
// time: slow and plain.
func reference(p, s string) bool {
	if p == "" {
		return s == ""
	}
	if p[0] == '*' {
		for i := 0; ; {
			if reference(p[1:], s[i:]) {
				return true
			}
			if i == len(s) {
				return false
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
		}
	}
	if s == "" {
		return false
	}
	r, n := utf8.DecodeRuneInString(s)
	switch p[0] {
	case '?':
		return reference(p[1:], s[n:])
	case '\\':
		return p[1] == s[0] && reference(p[2:], s[1:])
	case '[':
		q := p[1:]
		negated := q[0] == '^'
		if negated {
			q = q[1:]
		}
		in := false
		for first := true; first || q[0] != ']'; first = false {
			var lo, hi rune
			lo, q, _ = classChar(q)
			hi = lo
			if q[0] == '-' {
				hi, q, _ = classChar(q[1:])
			}
			in = in || lo <= r && r <= hi
		}
		return in != negated && reference(q[1:], s[n:])
	default:
		return p[0] == s[0] && reference(p[1:], s[1:])
	}
}
