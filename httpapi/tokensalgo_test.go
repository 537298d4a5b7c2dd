package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// hexOf returns n hex digits.
func hexOf(n int) string { return strings.Repeat("0123456789abcdef", n/16+1)[:n] }

// A first field ALGO:HEX is refused as a hash only when ALGO names a hash
// algorithm (in any case, in any common spelling) and HEX is as long as
// that algorithm's digest: anything else is a plain bearer token, as it
// was before hashes were refused.
func TestTokensFileRefusesOnlyAKnownAlgorithmAtItsDigestLength(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{
		"MD5:" + hexOf(32),
		"sha-1:" + hexOf(40),
		"SHA224:" + hexOf(56),
		"sha_256:" + hexOf(64),
		"sha-384:" + hexOf(96),
		"Sha512:" + hexOf(128),
		"sha512/256:" + hexOf(64),
		"SHA-512/224:" + hexOf(56),
		"sha3-224:" + hexOf(56),
		"SHA3-256:" + hexOf(64),
		"sha3-384:" + hexOf(96),
		"sha3_512:" + hexOf(128),
		"blake2b:" + hexOf(128),
		"BLAKE2b-256:" + hexOf(64),
		"blake2b512:" + hexOf(128),
		"blake2s:" + hexOf(64),
		"blake2s-128:" + hexOf(32),
		"blake2s256:" + hexOf(64),
	} {
		_, err := httpapi.ParseTokens(strings.NewReader(tok + " writer scan\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "line 1: token: ") || strings.Contains(err.Error(), tok[strings.Index(tok, ":")+1:]) {
			t.Errorf("tokens file line %q: %v; want it refused as a hash of another algorithm, naming the token field, not its text", tok, err)
		}
	}
	for _, tok := range []string{
		"md5:" + hexOf(40),         // md5's digest is 32 hex digits
		"sha1:" + hexOf(32),        // sha1's is 40
		"sha-256:" + hexOf(48),     // sha-256's is 64
		"sha512:" + hexOf(64),      // sha512's is 128
		"blake2s:" + hexOf(128),    // blake2s's is 64
		"blake2b-256:" + hexOf(40), // blake2b-256's is 64
		"md6:" + hexOf(32),         // no algorithm of that name
		"backup:" + hexOf(64),      // a service's name and a secret
		"ci-runner2:" + hexOf(40),
	} {
		toks, err := httpapi.ParseTokens(strings.NewReader(tok + " writer scan\n"))
		if err != nil || toks.Len() != 1 {
			t.Errorf("tokens file line %q: %v; want it loaded as a plain bearer token", tok, err)
		}
	}
}
