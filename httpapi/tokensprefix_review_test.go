package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A tokens file names a token by itself or by "sha256:HEX of it" (DESIGN.md),
// so that the file need not hold a bearer credential. A hash written with
// the prefix in capitals, as some tools print it (SHA256:3f0c...), is read
// as a plain token whose text is that string: the real token is refused
// 401, and the hash, which whoever reads the file has, is a working bearer
// token. The line should name the token's hash (the prefix read without
// regard to case) or be refused; never make the hash a credential.
func TestTokensFileHashWithACapitalPrefixIsNoBearerToken(t *testing.T) {
	t.Parallel()
	line := "SHA256:" + sha(writerToken) + " writer scan"
	toks, err := httpapi.ParseTokens(strings.NewReader(line + "\n"))
	if err != nil {
		return // refused: fine
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	body := `{"namespace":"scan","key":"k","owner":"o","ttl":"30s"}`
	byHash := send(t, "POST", s.url+"/v1/acquire", body, "Authorization", "Bearer SHA256:"+sha(writerToken))
	byToken := send(t, "POST", s.url+"/v1/acquire", body, "Authorization", "Bearer "+writerToken)
	if byHash.code != 401 || byToken.code != 200 {
		t.Fatalf("tokens file line %q: the hash as bearer token: HTTP %d; the token itself: HTTP %d; "+
			"want 401 for the hash (it is no credential) and 200 for the token", line, byHash.code, byToken.code)
	}
}
