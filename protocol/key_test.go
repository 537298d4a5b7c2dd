package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeyValidate(t *testing.T) {
	ns128 := strings.Repeat("n", MaxNamespaceLen)
	name512 := strings.Repeat("k", MaxNameLen)
	// "é" is two bytes: the limits count bytes, not runes.
	nameMultiByte := strings.Repeat("é", MaxNameLen/2)

	valid := []Key{
		{Namespace: "default", Name: "scan/target-1"},
		{Namespace: "a", Name: "b"},
		{Namespace: ns128, Name: name512},
		{Namespace: "ns", Name: nameMultiByte},
		{Namespace: "ns:with:colons", Name: "v1:3:abc"},
		{Namespace: "日本", Name: "キー"},
		{Namespace: "space ns", Name: "name with spaces"},
		{Namespace: "ns", Name: "emoji-\U0001F600"},
	}
	for _, k := range valid {
		if err := k.Validate(); err != nil {
			t.Errorf("Key%+v.Validate() = %v, want nil", k, err)
		}
		got, err := NewKey(k.Namespace, k.Name)
		if err != nil || got != k {
			t.Errorf("NewKey(%q, %q) = %+v, %v; want %+v, nil", k.Namespace, k.Name, got, err, k)
		}
	}

	invalid := []struct {
		key  Key
		want string // a fragment of the error text
	}{
		{Key{}, "namespace: must not be empty"},
		{Key{Namespace: "ns"}, "key: must not be empty"},
		{Key{Name: "k"}, "namespace: must not be empty"},
		{Key{Namespace: ns128 + "n", Name: "k"}, "namespace: 129 bytes is longer than the limit of 128"},
		{Key{Namespace: "ns", Name: name512 + "k"}, "key: 513 bytes is longer than the limit of 512"},
		{Key{Namespace: "ns", Name: nameMultiByte + "é"}, "key: 514 bytes"},
		{Key{Namespace: "ns", Name: "a\x00b"}, "key: control character U+0000 at byte 1"},
		{Key{Namespace: "ns", Name: "line\n"}, "key: control character U+000A"},
		{Key{Namespace: "ns", Name: "tab\there"}, "key: control character U+0009"},
		{Key{Namespace: "ns", Name: "del\x7f"}, "key: control character U+007F"},
		{Key{Namespace: "ns", Name: "c1-\u0085"}, "key: control character U+0085"},
		{Key{Namespace: "n\x1bs", Name: "k"}, "namespace: control character U+001B"},
		{Key{Namespace: "ns", Name: "\xff"}, "key: not valid UTF-8"},
		{Key{Namespace: "ns", Name: "ok\xc3"}, "key: not valid UTF-8"},
		{Key{Namespace: "\xed\xa0\x80", Name: "k"}, "namespace: not valid UTF-8"}, // a UTF-16 surrogate
		{Key{Namespace: "ns", Name: "zero\u200bwidth"}, "key: invisible formatting character U+200B"},
		{Key{Namespace: "ns", Name: "bidi\u202eoverride"}, "key: invisible formatting character U+202E"},
		{Key{Namespace: "\ufeffns", Name: "k"}, "namespace: invisible formatting character U+FEFF"},
	}
	for _, tc := range invalid {
		err := tc.key.Validate()
		if err == nil {
			t.Errorf("Key%+q.Validate() = nil, want an error containing %q", tc.key, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Key%+q.Validate() = %q, want it to contain %q", tc.key, err, tc.want)
		}
		if _, err := NewKey(tc.key.Namespace, tc.key.Name); err == nil {
			t.Errorf("NewKey(%+q) = nil error, want one", tc.key)
		}
	}
}

func TestKeyEncodeExamples(t *testing.T) {
	tests := []struct {
		key  Key
		want string
	}{
		{Key{Namespace: "default", Name: "job-1"}, "v1:7:defaultjob-1"},
		{Key{Namespace: "a", Name: "b"}, "v1:1:ab"},
		{Key{Namespace: "a:b", Name: "c"}, "v1:3:a:bc"},
		{Key{Namespace: "日本", Name: "k"}, "v1:6:日本k"},
		{Key{Namespace: strings.Repeat("n", MaxNamespaceLen), Name: "k"}, "v1:128:" + strings.Repeat("n", MaxNamespaceLen) + "k"},
	}
	for _, tc := range tests {
		if got := tc.key.Encode(); got != tc.want {
			t.Errorf("Key%+v.Encode() = %q, want %q", tc.key, got, tc.want)
		}
		got, err := ParseKey(tc.want)
		if err != nil || got != tc.key {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v, nil", tc.want, got, err, tc.key)
		}
	}
	if KeyEncodingVersion != 1 || !strings.HasPrefix(Key{Namespace: "a", Name: "b"}.Encode(), "v1:") {
		t.Errorf("the encoding's prefix does not carry KeyEncodingVersion %d", KeyEncodingVersion)
	}
}

// TestKeyEncodingInjectiveOnSplits checks the case a naive concatenation gets
// wrong: the same bytes split differently between namespace and name.
func TestKeyEncodingInjectiveOnSplits(t *testing.T) {
	const joined = "abc:def/ghi"
	seen := make(map[string]Key)
	for i := 1; i < len(joined); i++ {
		k := Key{Namespace: joined[:i], Name: joined[i:]}
		if err := k.Validate(); err != nil {
			t.Fatalf("test key %+v is invalid: %v", k, err)
		}
		enc := k.Encode()
		if prev, dup := seen[enc]; dup {
			t.Fatalf("%+v and %+v share the encoding %q", prev, k, enc)
		}
		seen[enc] = k
		if got, err := ParseKey(enc); err != nil || got != k {
			t.Fatalf("ParseKey(%q) = %+v, %v; want %+v", enc, got, err, k)
		}
	}
}

func TestParseKeyRefuses(t *testing.T) {
	refused := []string{
		"",
		"v1",
		"v1:",
		"v2:1:ab",
		"V1:1:ab",
		"1:ab",
		" v1:1:ab",
		"v1:1ab",   // no separator after the length
		"v1::ab",   // empty length
		"v1:01:ab", // leading zero: the encoding is canonical
		"v1:0:ab",  // empty namespace
		"v1:+1:ab", // a sign is not a digit
		"v1:-1:ab",
		"v1: 1:ab",
		"v1:1 :ab",
		"v1:0x1:ab",
		"v1:1_0:abcdefghijk",
		"v1:99999:ab", // more digits than any valid namespace length needs
		"v1:3:ab",     // length past the end
		"v1:2:ab",     // empty name
		"v1:1:a\x00",  // control character in the name
		"v1:1:\x01b",
		"v1:1:a\xff", // bad UTF-8
		"v1:2:\xc3\xa9\xff",
		"v1:1:a\u200b",
		"v1:129:" + strings.Repeat("n", 129) + "k",   // namespace too long
		"v1:1:n" + strings.Repeat("k", MaxNameLen+1), // name too long
	}
	for _, s := range refused {
		if k, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) = %+v, nil; want an error", s, k)
		} else if !strings.HasPrefix(err.Error(), "key: ") && !strings.HasPrefix(err.Error(), "namespace: ") {
			t.Errorf("ParseKey(%q) error %q does not start with its noun", s, err)
		}
	}
}

// checkKeyEncoding is the property shared by the fuzz target and its unit
// tests: a valid key round-trips through its encoding, and anything ParseKey
// accepts is a valid key whose encoding is exactly the input.
func checkKeyEncoding(t *testing.T, ns, name string) {
	t.Helper()
	k := Key{Namespace: ns, Name: name}
	enc := k.Encode()
	if k.Validate() == nil {
		got, err := ParseKey(enc)
		if err != nil {
			t.Fatalf("ParseKey(Encode(%+q)) = %v", k, err)
		}
		if got != k {
			t.Fatalf("ParseKey(Encode(%+q)) = %+q", k, got)
		}
	} else if got, err := ParseKey(enc); err == nil {
		t.Fatalf("ParseKey accepted %q, the encoding of the invalid key %+q, as %+q", enc, k, got)
	}
	// Treat the raw inputs as encodings too: ParseKey must not panic, and
	// whatever it accepts must be valid and re-encode to the same bytes.
	for _, s := range []string{ns, name, ns + name, "v1:" + ns + ":" + name} {
		got, err := ParseKey(s)
		if err != nil {
			continue
		}
		if verr := got.Validate(); verr != nil {
			t.Fatalf("ParseKey(%q) accepted the invalid key %+q: %v", s, got, verr)
		}
		if re := got.Encode(); re != s {
			t.Fatalf("ParseKey(%q) = %+q, which encodes to %q", s, got, re)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("ParseKey accepted invalid UTF-8 %q", s)
		}
	}
}

// checkKeyPair checks injectivity: two different valid keys never share an
// encoding, and equal keys always do.
func checkKeyPair(t *testing.T, a, b Key) {
	t.Helper()
	if a.Validate() != nil || b.Validate() != nil {
		return
	}
	if a != b && a.Encode() == b.Encode() {
		t.Fatalf("keys %+q and %+q share the encoding %q", a, b, a.Encode())
	}
	if a == b && a.Encode() != b.Encode() {
		t.Fatalf("equal keys %+q encode differently", a)
	}
}

// resplit returns the key made of k's bytes split at another place, the
// collision that a length prefix exists to prevent.
func resplit(k Key, at int) Key {
	joined := k.Namespace + k.Name
	if joined == "" {
		return k
	}
	at %= len(joined)
	return Key{Namespace: joined[:at], Name: joined[at:]}
}

// checkKeyEncodingAll runs every property over one fuzz input.
func checkKeyEncodingAll(t *testing.T, ns, name, ns2, name2 string) {
	t.Helper()
	checkKeyEncoding(t, ns, name)
	checkKeyEncoding(t, ns2, name2)
	a := Key{Namespace: ns, Name: name}
	checkKeyPair(t, a, Key{Namespace: ns2, Name: name2})
	checkKeyPair(t, a, resplit(a, len(ns2)))
}

func TestKeyEncodingProperty(t *testing.T) {
	for _, s := range keyEncodingSeeds {
		checkKeyEncodingAll(t, s.ns, s.name, s.ns2, s.name2)
	}
}
