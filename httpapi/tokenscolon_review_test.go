package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// The contract's tokens file names a token as the bearer token itself or
// sha256:HEX of it: a bearer token of the common NAME:SECRET form
// (deploy:, ci:, a service's name and a random hex secret) is a plain
// token, and loaded at 9969fe5. Refusing every LETTERS:HEX token, not
// only the names of hash algorithms, makes a working tokens file refuse
// to load after an upgrade (serve does not start), though no such token
// can be taken for the hash of another.
func TestTokensFileKeepsAPlainTokenOfTheFormNameColonHex(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{
		"deploy:" + strings.Repeat("0123456789abcdef", 2),
		"ci-runner:" + strings.Repeat("9f3c", 10),
	} {
		tokens, err := httpapi.ParseTokens(strings.NewReader(tok + " writer scan\n"))
		if err != nil || tokens.Len() != 1 {
			t.Fatalf("tokens file line %q (a plain bearer token, no algorithm's name before the colon): %v; want it loaded, as at 9969fe5", tok, err)
		}
	}
}
