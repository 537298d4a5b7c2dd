package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A namespace may hold '#' (team#1), and the namespace glob grammar, which
// docs/http-api.md says is one grammar wherever a glob is written (a
// tokens file's NS-GLOB included), quotes any character with '\'. So a
// tokens file must be able to scope a token to team#1: `team\#1` is that
// glob. The tokens file cut every line at its first '#', the quoted one
// too, and the line was refused (a trailing '\'). Unquoted, `team#1` is
// the glob team and a comment, as the contract says ("# starts a
// comment"): the namespace team, not team#1.
func TestTokensFileGlobCanNameANamespaceWithAHash(t *testing.T) {
	t.Parallel()
	const hashTok = "hash-writer-0123456789"
	toks, err := httpapi.ParseTokens(strings.NewReader(hashTok + ` writer team\#1   # the token of team#1` + "\n"))
	if err != nil {
		t.Fatalf("tokens file line %q: %v; want the glob team\\#1, which matches the namespace team#1",
			hashTok+` writer team\#1   # the token of team#1`, err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	body, _ := json.Marshal(map[string]string{"namespace": "team#1", "key": "k", "owner": "o", "ttl": "30s"})
	r := send(t, "POST", s.url+"/v1/acquire", string(body), "Authorization", "Bearer "+hashTok)
	expect(t, `acquire in team#1 with the token of glob team\#1`, r, 200, "acquired")

	const plainTok = "plain-writer-0123456789"
	toks2, err := httpapi.ParseTokens(strings.NewReader(plainTok + " writer team#1\n"))
	if err != nil {
		t.Fatalf("tokens file line %q: %v; want the glob team, then a comment", plainTok+" writer team#1", err)
	}
	s2 := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks2 }})
	for ns, want := range map[string]int{"team": 200, "team#1": 403} {
		body, _ := json.Marshal(map[string]string{"namespace": ns, "key": "k", "owner": "o", "ttl": "30s"})
		r := send(t, "POST", s2.url+"/v1/acquire", string(body), "Authorization", "Bearer "+plainTok)
		if r.code != want {
			t.Fatalf("acquire in %s with the token of the unquoted line `writer team#1` (the glob team, # starts a comment): HTTP %d %s; want %d", ns, r.code, r.body, want)
		}
	}
}
