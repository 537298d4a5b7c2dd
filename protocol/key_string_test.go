package protocol

import (
	"strings"
	"testing"
)

func TestKeyFromString(t *testing.T) {
	t.Parallel()
	good := map[string]Key{
		"scans/target-42":    {Namespace: "scans", Name: "target-42"},
		"scans/10.0.0.0/24":  {Namespace: "scans", Name: "10.0.0.0/24"},
		"default/a b":        {Namespace: "default", Name: "a b"},
		"billing/shard-7/x/": {Namespace: "billing", Name: "shard-7/x/"},
		// The namespace part escapes '/' and '%'; the name is verbatim.
		"p%2Fq/k":            {Namespace: "p/q", Name: "k"},
		"p/q/k":              {Namespace: "p", Name: "q/k"},
		"50%25off/x%2Fy":     {Namespace: "50%off", Name: "x%2Fy"},
		"a%2Fb%25c/d/e%2Ff/": {Namespace: "a/b%c", Name: "d/e%2Ff/"},
	}
	for in, want := range good {
		got, err := KeyFromString(in)
		if err != nil || got != want {
			t.Errorf("KeyFromString(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("KeyFromString(%q).String() = %q", in, got.String())
		}
	}
	bad := map[string]string{
		"target-42":    "default/target-42",
		"/target-42":   "namespace",
		"scans/":       "key",
		"scans/a\x00b": "control",
		"":             "namespace/name",
		"50%zz/x":      "%25",
		"a%/x":         "%2F",
	}
	for in, want := range bad {
		if _, err := KeyFromString(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("KeyFromString(%q) = %v; want an error mentioning %q", in, err, want)
		}
	}
	// The storage encoding is not this form.
	if _, err := KeyFromString(Key{Namespace: "ns", Name: "n"}.Encode()); err == nil {
		t.Errorf("KeyFromString accepted the storage encoding")
	}
}

// Every key round-trips through String and KeyFromString, and two keys
// never print alike; other escapes read as an HTTP path segment's do.
func TestKeyStringRoundTrips(t *testing.T) {
	t.Parallel()
	seen := map[string]Key{}
	for _, ns := range []string{"p", "p/q", "p%q", "%2F", "/", "%", "a b", "ü/%25"} {
		for _, name := range []string{"k", "q/k", "%2F", "/", "a%b/c"} {
			k := Key{Namespace: ns, Name: name}
			s := k.String()
			if other, dup := seen[s]; dup {
				t.Errorf("%+v and %+v both print %q", k, other, s)
			}
			seen[s] = k
			if got, err := KeyFromString(s); err != nil || got != k {
				t.Errorf("KeyFromString(%q) = %+v, %v; want %+v", s, got, err, k)
			}
		}
	}
	// Only the two escapes String writes are read back: any other is
	// refused, not decoded into another namespace (a release before
	// escaping read "team%20a/job" as namespace "team%20a").
	for _, s := range []string{"a%20b/k", "team%20a/job", "50%off/k", "x%/k", "x%2/k", "%2G/k"} {
		if got, err := KeyFromString(s); err == nil {
			t.Errorf("KeyFromString(%q) = %+v, want an error naming %%25 and %%2F", s, got)
		} else if !strings.Contains(err.Error(), "%25") {
			t.Errorf("KeyFromString(%q): %v, want it to name %%25", s, err)
		}
	}
	if got, err := KeyFromString("a%2fb/k"); err != nil || got != (Key{Namespace: "a/b", Name: "k"}) {
		t.Errorf("KeyFromString(a%%2fb/k) = %+v, %v; want namespace a/b", got, err)
	}
}
