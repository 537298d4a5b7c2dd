package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// In a tokens file an unquoted # starts a comment wherever it stands, and
// \# is the one way to put a # into a field: the token field too (the
// bearer token tok#en... is written tok\#en...). In a glob, \\ is a quoted
// backslash, so the # after it is unquoted and starts a comment.
func TestTokensFileBackslashHashPutsAHashIntoAField(t *testing.T) {
	t.Parallel()
	const (
		hashTok  = "tok#en-0123456789abcdef" // the bearer token, with its #
		slashTok = "slash-writer-0123456789"
	)
	file := `tok\#en-0123456789abcdef writer scan#1 # the token of scan` + "\n" +
		slashTok + ` writer team\\#1` + "\n"
	toks, err := httpapi.ParseTokens(strings.NewReader(file))
	if err != nil || toks.Len() != 2 {
		t.Fatalf("tokens file %q: %v; want two tokens", file, err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for _, c := range []struct {
		tok, ns string
		want    int
	}{
		{hashTok, "scan", 200},
		{hashTok, "scan#1", 403},
		{slashTok, `team\`, 200},
		{slashTok, `team\#1`, 403},
	} {
		body, _ := json.Marshal(map[string]string{"namespace": c.ns, "key": "k", "owner": "o", "ttl": "30s"})
		r := send(t, "POST", s.url+"/v1/acquire", string(body), "Authorization", "Bearer "+c.tok)
		if r.code != c.want {
			t.Errorf("acquire in %q with the bearer token %q of tokens file %q: HTTP %d %s; want %d", c.ns, c.tok, file, r.code, r.body, c.want)
		}
	}
}
