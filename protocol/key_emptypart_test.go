package protocol_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// KeyFromString of a key with an empty part ("a/", "/x") says which part
// is empty: "key: must not be empty" for "a/" left the reader to guess
// whether the namespace, the name or the whole key was missing.
func TestKeyFromStringNamesTheEmptyPart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, part string }{{"a/", "name"}, {"/x", "namespace"}, {"/", "namespace"}} {
		_, err := protocol.KeyFromString(c.in)
		if err == nil || !strings.Contains(err.Error(), c.part+" is empty") || !strings.Contains(err.Error(), `"`+c.in+`"`) {
			t.Errorf("KeyFromString(%q) = %v; want an error quoting %q and saying its %s is empty", c.in, err, c.in, c.part)
		}
	}
}
