package textfield

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

func TestValidateNamesTheField(t *testing.T) {
	err := Validate("owner", "", 256)
	if err == nil || err.Error() != "owner: must not be empty" {
		t.Fatalf("Validate(owner, \"\") = %v, want \"owner: must not be empty\"", err)
	}
	if err := Validate("owner", strings.Repeat("o", 3), 3); err != nil {
		t.Fatalf("Validate at exactly the limit = %v, want nil", err)
	}
	if err := Validate("owner", strings.Repeat("o", 4), 3); err == nil {
		t.Fatal("Validate one byte past the limit = nil, want an error")
	}
}

// The ASCII path and the rune path refuse the same characters, at the
// same byte offsets, with the same text.
func TestValidateASCIIAgreesWithRunes(t *testing.T) {
	reference := func(s string) string {
		for i, r := range s {
			if unicode.IsControl(r) {
				return fmt.Sprintf("f: control character %U at byte %d", r, i)
			}
			if unicode.Is(unicode.Cf, r) {
				return fmt.Sprintf("f: invisible formatting character %U at byte %d", r, i)
			}
		}
		return ""
	}
	var cases []string
	for c := range 0x80 {
		cases = append(cases, "ab"+string(rune(c))+"c", "é"+string(rune(c)), string(rune(c))+"é")
	}
	cases = append(cases, "abc\u0085", "ab\u200bc", "日本\x01", "abc\u00ad", "plain-ascii", "naïve")
	for _, s := range cases {
		got := ""
		if err := Validate("f", s, 256); err != nil {
			got = err.Error()
		}
		if want := reference(s); got != want {
			t.Errorf("Validate(%q) = %q, want %q", s, got, want)
		}
	}
}
