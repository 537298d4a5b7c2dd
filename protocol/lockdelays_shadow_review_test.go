package protocol_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestValidateLockDelaysRefusesShadowedGlob: ValidateLockDelays (and so
// New, which panics on what it refuses) promises to refuse an entry that
// can never apply because "an earlier glob matches every namespace it
// does". It catches that only for a plain namespace or an earlier "*":
// a glob under an earlier, wider glob is accepted and silently never
// applies (every "jobs-eu-*" namespace gets the "jobs-*" delay).
func TestValidateLockDelaysRefusesShadowedGlob(t *testing.T) {
	for _, tc := range []struct{ first, second string }{
		{"jobs-*", "jobs-eu-*"},
		{"jobs-*", `jobs\-eu`}, // a plain namespace, written with an escape
		{"j*", "jobs-?"},
	} {
		delays := []protocol.NamespaceLockDelay{
			{Namespaces: tc.first, Delay: time.Second},
			{Namespaces: tc.second, Delay: 5 * time.Second},
		}
		if err := protocol.ValidateLockDelays(delays); err == nil {
			t.Errorf("ValidateLockDelays(%q before %q) = nil; want an error: the second can never apply", tc.first, tc.second)
		}
	}
}
