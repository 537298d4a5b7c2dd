package migrations

import "testing"

func TestFirstSchema(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`leasestore`:                "leasestore",
		`"$user", public`:           "public",
		`"$user",leasestore,public`: "leasestore",
		`LeaseStore`:                "leasestore",
		`"Lease ""Store""", public`: `Lease "Store"`,
		` "a,b" , c`:                "a,b",
		`"$user"`:                   "",
		``:                          "",
	}
	for in, want := range cases {
		if got := firstSchema(in); got != want {
			t.Errorf("firstSchema(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuoteIdent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{`leasestore`: `"leasestore"`, `Lease "Store"`: `"Lease ""Store"""`, "a\x00b": `"ab"`} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}
