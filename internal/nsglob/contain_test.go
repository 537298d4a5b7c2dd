package nsglob

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShadows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prev, glob string
		want       bool
	}{
		{"*", "anything", true},
		{"**", "jobs-*", true},
		{"jobs-*", "jobs-eu-*", true},
		{"jobs-*", "jobs-eu", true},
		{"jobs-*", `jobs\-eu`, true},
		{"j*", "jobs-?", true},
		{"jobs-?", "jobs-[ab]", true},
		{"jobs-[a-z]", "jobs-[b-d]", true},
		{"jobs-[^0-9]", "jobs-[a-z]", true},
		{"*-*", "a-*-b", true},
		{"?*", "a*", true},
		{`\*`, "*", false}, // a literal star does not match every namespace
		{"*", `\*`, true},
		{"jobs-eu-*", "jobs-*", false},
		{"jobs-?", "j*", false},
		{"jobs-[a-c]", "jobs-[a-d]", false},
		{"jobs-[^a]", "jobs-?", false},
		{"a*b", "a*", false},
		{"a*", "*a", false},
		{"?*", "*", false}, // "" (no namespace, but a string) is a witness
		{"é*", "é?", true},
		{"?", "é", true},
		{"[^é]", "é", false},
		{"billing", "jobs-*", false},
		{"jobs-eu", "jobs-*", false},
		{"team/*", "team/a/b", true},
	} {
		if got := Shadows(tc.prev, tc.glob); got != tc.want {
			t.Errorf("Shadows(%q, %q) = %v, want %v", tc.prev, tc.glob, got, tc.want)
		}
	}
}

// TestContainsAgreesWithBruteForce compares contains with every string up
// to a length over the characters that matter to the two globs: a witness
// must be matched by glob and not by wide, and an inclusion must hold for
// every string tried.
func TestContainsAgreesWithBruteForce(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const patternAlphabet = `ab*?[]^-\`
	pick := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(patternAlphabet[rng.IntN(len(patternAlphabet))])
		}
		return b.String()
	}
	// specialize writes a glob that wide often contains: each star made
	// narrower or longer, each '?' a character or a class.
	specialize := func(wide string) string {
		var b strings.Builder
		for i := 0; i < len(wide); i++ {
			switch c := wide[i]; {
			case c == '*':
				b.WriteString([]string{"", "a", "*", "a*", "?*", "*b", "*a?"}[rng.IntN(7)])
			case c == '?':
				b.WriteString([]string{"a", "b", "?", "[ab]", "[^a]", `\*`}[rng.IntN(6)])
			case c == '\\' && i+1 < len(wide):
				b.WriteString(wide[i : i+2])
				i++
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	in, out := 0, 0
	for in+out < 2000 {
		wide := pick(rng.IntN(6))
		glob := pick(rng.IntN(6))
		if rng.IntN(2) == 0 {
			glob = specialize(wide)
		}
		if Validate(wide) != nil || Validate(glob) != nil || wide == glob {
			continue
		}
		if _, c, _ := contains(wide, glob); c {
			in++
		} else {
			out++
		}
		checkContains(t, wide, glob, 4)
	}
	if in < 200 || out < 200 {
		t.Errorf("%d pairs contained, %d not: the generator should give both often", in, out)
	}
}

// FuzzContains: go test -fuzz FuzzContains ./internal/nsglob/
func FuzzContains(f *testing.F) {
	for _, s := range [][2]string{
		{"jobs-*", "jobs-eu-*"}, {"j*", "jobs-?"}, {"jobs-*", `jobs\-eu`},
		{"a*b", "a*"}, {"[^a]*", "?b*"}, {"*a*", "*a?a*"}, {"[a-c]?", "[b-d]*"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, wide, glob string) {
		if Validate(wide) != nil || Validate(glob) != nil || len(wide) > 8 || len(glob) > 8 {
			return
		}
		checkContains(t, wide, glob, 4)
	})
}

// checkContains checks contains(wide, glob) against brute force over
// every string of up to maxLen characters, each one of the runs of
// characters the globs tell apart (found independently of alphabet: every
// character of the globs, the one after it, and one below them all).
func checkContains(t *testing.T, wide, glob string, maxLen int) {
	t.Helper()
	witness, in, ok := contains(wide, glob)
	if !ok {
		if utf8.ValidString(wide) && utf8.ValidString(glob) {
			t.Fatalf("contains(%q, %q) could not tell", wide, glob)
		}
		return
	}
	if !in {
		if !Match(glob, witness) || Match(wide, witness) {
			t.Fatalf("contains(%q, %q): witness %q is not matched by the second and missed by the first", wide, glob, witness)
		}
		return
	}
	chars := []rune{1}
	for _, r := range wide + glob {
		chars = append(chars, r, r+1)
	}
	slices.Sort(chars)
	chars = slices.Compact(chars)
	var try func(prefix []rune)
	try = func(prefix []rune) {
		s := string(prefix)
		if Match(glob, s) && !Match(wide, s) {
			t.Fatalf("contains(%q, %q) = true, but the second matches %q and the first does not", wide, glob, s)
		}
		if len(prefix) == maxLen {
			return
		}
		for _, c := range chars {
			try(append(prefix, c))
		}
	}
	try(nil)
}

// TestContainsGivesUpOnHugeGlobs: a glob whose search would be long (here
// thousands of characters, each a run of its own) is left to the plain
// checks, quickly, rather than making New slow.
func TestContainsGivesUpOnHugeGlobs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for r := rune('a'); r < 'a'+3000; r++ {
		b.WriteRune(r)
	}
	long := b.String()
	if _, _, ok := contains("*"+long+"*", long+"*"); ok {
		t.Errorf("contains over globs of 3000 characters answered; want it to give up")
	}
	if !Shadows("*", long) || Shadows(long, long+"x") {
		t.Errorf("Shadows of huge globs: the plain checks do not answer as they should")
	}
}
