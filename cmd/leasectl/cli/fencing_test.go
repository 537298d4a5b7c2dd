package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// fencing raise moves every later token past the floor it prints, and a
// bad --by is refused with exit 2 before the counter moves.
func TestFencingRaise(t *testing.T) {
	for name, e := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e(t)
			acquire := func(k string) int64 {
				t.Helper()
				r := runCLI(t, e, "acquire", k, "--owner", "w", "-o", "json")
				wantCode(t, r, 0)
				return token(t, r.json(t))
			}
			first := acquire("a")
			for _, by := range []string{"999", "0", "-1", "1000000000001", "lots"} {
				r := runCLI(t, e, "fencing", "raise", "--by", by)
				wantCode(t, r, 2)
			}
			if next := acquire("b"); next != first+1 {
				t.Fatalf("token %d after refused raises, want %d", next, first+1)
			}
			r := runCLI(t, e, "fencing", "raise", "-o", "json")
			wantCode(t, r, 0)
			m := r.json(t)
			floor := int64(m["floor"].(float64))
			if m["status"] != "ok" || floor < first+1+protocol.DefaultTokenRaise {
				t.Fatalf("fencing raise: %v, want status ok and a floor of at least %d", m, first+1+protocol.DefaultTokenRaise)
			}
			if tok := acquire("a2"); tok <= floor {
				t.Fatalf("token %d after the raise, want above %d", tok, floor)
			}
			text := runCLI(t, e, "fencing", "raise", "--by", "1000")
			wantCode(t, text, 0)
			if !strings.Contains(text.stdout, "every token issued from now on is greater than") {
				t.Fatalf("fencing raise printed %q", text.stdout)
			}
			wantCode(t, runCLI(t, e, "fencing"), 2)
			wantCode(t, runCLI(t, e, "fencing", "raise", "extra"), 2)
		})
	}
}
