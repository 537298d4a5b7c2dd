package listcursor

import (
	"errors"
	"strings"
	"testing"
)

func TestBoundCursorGoesOnOnlyWithItsList(t *testing.T) {
	t.Parallel()
	a := Scope{Namespace: "a"}
	for _, name := range []string{"k1", "名前/with/slashes", strings.Repeat("k", 512)} {
		c, err := Bind(Encode(name), a, 512)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode(c, 512); err != nil || got != name {
			t.Fatalf("Decode(Bind(%q)) = %q, %v", name, got, err)
		}
		if again, err := Bind(c, a, 512); err != nil || again != c {
			t.Fatalf("Bind of a bound cursor: %q, %v, want %q", again, err, c)
		}
		if err := Check(c, a, 512); err != nil {
			t.Fatalf("Check with its own list: %v", err)
		}
		for _, other := range []Scope{{Namespace: "b"}, {Namespace: "a", Prefix: "k"}, {Namespace: "a", Owner: "o"},
			{Namespace: "a", IncludeExpired: true}, {Namespace: "a\x00"}} {
			if err := Check(c, other, 512); !errors.Is(err, ErrOtherList) {
				t.Fatalf("Check(%+v) of a cursor of %+v: %v, want ErrOtherList", other, a, err)
			}
		}
		// An unbound cursor (every release's before bound ones) goes on with any list.
		if err := Check(Encode(name), Scope{Namespace: "b"}, 512); err != nil {
			t.Fatalf("Check of an unbound cursor: %v", err)
		}
	}
	if c, err := Bind("", a, 512); c != "" || err != nil {
		t.Fatalf("Bind(\"\") = %q, %v", c, err)
	}
	for _, bad := range []string{"c2.", "c2.YQ", "c2.!!", "c3.YWJjZGVmZ2hp", "c2." + strings.Repeat("A", 11)} {
		if _, err := Decode(bad, 512); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
		if err := Check(bad, a, 512); err == nil || errors.Is(err, ErrOtherList) {
			t.Errorf("Check(%q) = %v, want the decoding error", bad, err)
		}
	}
}

// FuzzDecode feeds arbitrary cursors and lists to the codec: it must never
// panic, a cursor it reads must resume after a name that re-encodes to a
// cursor reading the same, and a cursor bound to a list must pass Check
// with that list and resume after the same name.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{"", "c1.", "c1.YQ", "c2.", "c2.YQ", "c2.AAAAAAAAAAthing", "c3.YQ", "c1.!!", "c1.AA"} {
		f.Add(seed, "ns", "pre", "o", false)
	}
	if c, err := Bind(Encode("k"), Scope{Namespace: "ns"}, 512); err == nil {
		f.Add(c, "ns", "", "", false)
		f.Add(c, "other", "", "", true)
	}
	f.Fuzz(func(t *testing.T, cursor, ns, prefix, owner string, inc bool) {
		s := Scope{Namespace: ns, Prefix: prefix, Owner: owner, IncludeExpired: inc}
		if cursor == "" { // no cursor: the first page of any list
			if c, err := Bind(cursor, s, 512); c != "" || err != nil || Check(cursor, s, 512) != nil {
				t.Fatalf("the empty cursor: Bind %q, %v; Check %v", c, err, Check(cursor, s, 512))
			}
			return
		}
		name, err := Decode(cursor, 512)
		cerr := Check(cursor, s, 512)
		if err != nil {
			if cerr == nil || errors.Is(cerr, ErrOtherList) {
				t.Fatalf("Decode(%q) failed (%v) but Check said %v", cursor, err, cerr)
			}
			return
		}
		if again, err := Decode(Encode(name), 512); err != nil || again != name {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", name, again, err)
		}
		bound, err := Bind(cursor, s, 512)
		if err != nil {
			t.Fatalf("Bind of a cursor that decodes (%q): %v", cursor, err)
		}
		if got, err := Decode(bound, 512); err != nil || got != name {
			t.Fatalf("Decode(Bind(%q)) = %q, %v; want %q", cursor, got, err, name)
		}
		if err := Check(bound, s, 512); err != nil {
			t.Fatalf("Check of a cursor bound to its own list: %v", err)
		}
	})
}
