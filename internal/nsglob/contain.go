package nsglob

import (
	"slices"
	"unicode/utf8"
)

// term is one element of a parsed glob: a star, a '?', a character class
// or a literal character.
type term struct {
	kind   byte // termStar, termAny, termClass, termLit
	r      rune // termLit's character
	neg    bool // termClass: '^'
	ranges [][2]rune
}

const (
	termStar = iota
	termAny
	termClass
	termLit
)

// maxContainWork bounds the search of contains, counted in terms looked
// at (a few milliseconds): globs that need more (none that a person
// writes) are left to the plain checks of [Shadows].
const maxContainWork = 1 << 23

// matches reports whether t, a single-character term, matches c.
func (t term) matches(c rune) bool {
	switch t.kind {
	case termAny:
		return true
	case termLit:
		return t.r == c
	}
	in := false
	for _, rg := range t.ranges {
		in = in || rg[0] <= c && c <= rg[1]
	}
	return in != t.neg
}

// parse splits a glob into terms, runs of stars made one. ok is false
// when the glob is malformed or holds bytes that are not UTF-8 (which
// match byte by byte, so no rune stands for them).
func parse(pattern string) (terms []term, ok bool) {
	if check(pattern) != "" {
		return nil, false
	}
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			if len(terms) == 0 || terms[len(terms)-1].kind != termStar {
				terms = append(terms, term{kind: termStar})
			}
			pattern = pattern[1:]
		case '?':
			terms = append(terms, term{kind: termAny})
			pattern = pattern[1:]
		case '[':
			t := term{kind: termClass}
			pattern = pattern[1:]
			if pattern[0] == '^' {
				t.neg, pattern = true, pattern[1:]
			}
			for nrange := 0; ; nrange++ {
				if pattern[0] == ']' && nrange > 0 {
					pattern = pattern[1:]
					break
				}
				var lo, hi rune
				lo, pattern, _ = classChar(pattern)
				hi = lo
				if pattern[0] == '-' {
					hi, pattern, _ = classChar(pattern[1:])
				}
				t.ranges = append(t.ranges, [2]rune{lo, hi})
			}
			terms = append(terms, t)
		case '\\':
			pattern = pattern[1:]
			fallthrough
		default:
			r, n := utf8.DecodeRuneInString(pattern)
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			terms = append(terms, term{kind: termLit, r: r})
			pattern = pattern[n:]
		}
	}
	return terms, true
}

// states is a set of positions in a glob's terms (len(terms)+1 of them,
// the last one accepting), one byte each so that it serves as a map key.
type states []byte

// closure adds the positions a star lets the glob skip to: a star
// matches the empty string too.
func closure(ts []term, s states) states {
	for i, t := range ts {
		if s[i] != 0 && t.kind == termStar {
			s[i+1] = 1
		}
	}
	return s
}

// step returns the positions after reading c from s; ok is false when
// there are none.
func step(ts []term, s states, c rune) (next states, ok bool) {
	next = make(states, len(s))
	for i, t := range ts {
		if s[i] == 0 {
			continue
		}
		switch {
		case t.kind == termStar:
			next[i], ok = 1, true
		case t.matches(c):
			next[i+1], ok = 1, true
		}
	}
	return closure(ts, next), ok
}

// alphabet returns one character of each run of characters that every
// term of both globs treats alike: a run starts at 0, at each literal and
// the character after it, and at each range's first character and the
// one after its last. Surrogates, which no string holds, are left out.
func alphabet(globs ...[]term) []rune {
	cuts := []rune{0, 0xD800, 0xE000}
	for _, ts := range globs {
		for _, t := range ts {
			switch t.kind {
			case termLit:
				cuts = append(cuts, t.r, t.r+1)
			case termClass:
				for _, rg := range t.ranges {
					cuts = append(cuts, rg[0], rg[1]+1)
				}
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	return slices.DeleteFunc(cuts, func(r rune) bool {
		return r > utf8.MaxRune || 0xD800 <= r && r < 0xE000
	})
}

// contains reports whether wide matches every string that glob matches.
// When it does not, witness is a shortest string glob matches and wide
// does not. ok is false when it cannot tell: a glob malformed or holding
// bytes that are not UTF-8, or a search longer than maxContainWork.
//
// It walks the pairs of position sets (glob's, wide's) that one string
// reaches, breadth first, trying one character of each run that the two
// globs treat alike ([alphabet]): a pair where glob accepts and wide does
// not is a string of the one that the other misses.
func contains(wide, glob string) (witness string, contained, ok bool) {
	ws, okW := parse(wide)
	gs, okG := parse(glob)
	if !okW || !okG {
		return "", false, false
	}
	sigma := alphabet(ws, gs)
	type node struct {
		g, w   states
		parent int
		c      rune
	}
	start := func(ts []term) states {
		s := make(states, len(ts)+1)
		s[0] = 1
		return closure(ts, s)
	}
	nodes := []node{{g: start(gs), w: start(ws), parent: -1}}
	seen := map[string]bool{string(nodes[0].g) + string(nodes[0].w): true}
	work := 0
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if n.g[len(gs)] != 0 && n.w[len(ws)] == 0 {
			var rs []rune
			for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
				rs = append(rs, nodes[j].c)
			}
			slices.Reverse(rs)
			return string(rs), false, true
		}
		for _, c := range sigma {
			if work += len(gs) + len(ws) + 2; work > maxContainWork {
				return "", false, false
			}
			g, live := step(gs, n.g, c)
			if !live {
				continue // glob matches nothing that starts so
			}
			w, _ := step(ws, n.w, c)
			key := string(g) + string(w)
			if seen[key] {
				continue
			}
			seen[key] = true
			nodes = append(nodes, node{g: g, w: w, parent: i, c: c})
		}
	}
	return "", true, true
}
