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
