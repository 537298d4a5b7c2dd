package protocol

import (
	"strings"
	"testing"
)

// keyEncodingSeeds is FuzzKeyEncoding's seed corpus. Every plain `go test`
// runs it (through the fuzz target and TestKeyEncodingProperty); the files in
// testdata/fuzz/FuzzKeyEncoding add inputs found worth keeping.
var keyEncodingSeeds = []struct{ ns, name, ns2, name2 string }{
	{"default", "job-1", "default", "job-2"},
	{"a", "bc", "ab", "c"},   // same bytes, split elsewhere
	{"ab", "c", "a", "bc"},   //
	{"a:b", "c", "a", "b:c"}, // separators inside the parts
	{"1", "2:3", "12", "3"},  // digits that look like a length prefix
	{"v1", ":1:ab", "v1:1", "ab"},
	{"ns", "v1:2:nsk", "v1:2:ns", "k"}, // encodings nested in names
	{"日本", "語", "日", "本語"},             // multi-byte runes split mid-way by resplit
	{"x", "\xff", "x", "\u200b"},       // invalid keys
	{"", "k", "ns", ""},
	{"n\x00s", "k", "ns", "k\n"},
	{strings.Repeat("n", MaxNamespaceLen), "k", strings.Repeat("n", MaxNamespaceLen+1), "k"},
	{"ns", strings.Repeat("k", MaxNameLen), "ns", strings.Repeat("k", MaxNameLen+1)},
	{"v1:1:ab", "v1:01:ab", "v1:+1:ab", "v1:-1:ab"}, // encodings as raw input to ParseKey
	{"v1:0:ab", "v1:3:ab", "v1:99999:ab", "v2:1:ab"},
}

// FuzzKeyEncoding checks the canonical key encoding: for any valid (ns, name),
// ParseKey(Encode(k)) == k; two different valid keys never share an encoding;
// ParseKey never panics, and anything it accepts is a valid key that
// re-encodes to the very same string.
//
// Run it longer with: go test -run '^$' -fuzz FuzzKeyEncoding -fuzztime 30s ./protocol
func FuzzKeyEncoding(f *testing.F) {
	for _, s := range keyEncodingSeeds {
		f.Add(s.ns, s.name, s.ns2, s.name2)
	}
	f.Fuzz(checkKeyEncodingAll)
}
