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
