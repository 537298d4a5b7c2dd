package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A token written ALGO:HEX of an algorithm other than sha256 (md5:,
// sha1:, sha512:, SHA-256:) reads as a hash, which a tokens file names
// only as sha256:HEX: read as a plain token, the hash, which whoever reads
// the file has, would be a working bearer token. It is refused, naming
// the line and the field, never the text.
func TestTokensFileRefusesAHashOfAnotherAlgorithm(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{
		"md5:" + strings.Repeat("a1", 16),
		"sha1:" + strings.Repeat("b2", 20),
		"SHA-256:" + sha(writerToken),
		"sha512:" + strings.Repeat("c3", 64),
	} {
		_, err := httpapi.ParseTokens(strings.NewReader("# hashes\n" + tok + " writer scan\n"))
		if err == nil {
			t.Fatalf("tokens file line %q loaded: the hash would be a bearer token", tok)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "line 2: token: ") || strings.Contains(msg, tok[strings.Index(tok, ":")+1:]) {
			t.Fatalf("tokens file line %q: %v; want it refused naming line 2 and the token field, not the text", tok, err)
		}
	}
}

// "# starts a comment" (the contract): an unquoted # inside a field starts
// one too, so the line `TOKEN writer team#1 # ...` names the glob team, and
// only team\#1 names the namespace team#1
// (TestTokensFileGlobCanNameANamespaceWithAHash).
func TestTokensFileHashInsideAFieldStartsAComment(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(writerToken + " writer team#1 # the token of team#1\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for ns, want := range map[string]int{"team": 200, "team#1": 403} {
		r := send(t, "POST", s.url+"/v1/acquire", `{"namespace":"`+ns+`","key":"k","owner":"o","ttl":"30s"}`,
			"Authorization", "Bearer "+writerToken)
		if r.code != want {
			t.Fatalf("acquire in %s with the token of the line `writer team#1 # ...` (the glob team, then a comment): HTTP %d %s; want %d", ns, r.code, r.body, want)
		}
	}
}
