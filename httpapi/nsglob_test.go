package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// A tokens file's NS-GLOB is a namespace glob, the same grammar as every
// other namespace glob of the module (serve --lock-delay NS=D,
// protocol.Config.LockDelays): "*" matches any run of characters, "/"
// included; "?" one character; [...] a class; "\" quotes the character
// after it. A glob meaning one thing in --lock-delay and another in the
// tokens file of the same serve gives an operator two rules to get right.
func TestTokenGlobsAreNamespaceGlobs(t *testing.T) {
	t.Parallel()
	const (
		teamTok  = "team-writer-0123456789"
		scanTok  = "scan-writer-0123456789"
		shardTok = "shard-writer-0123456789"
		litTok   = "literal-writer-0123456789"
	)
	toks, err := httpapi.ParseTokens(strings.NewReader(teamTok + " writer team/*\n" +
		scanTok + " writer scan-?\n" +
		shardTok + " writer shard-[0-3],shard-[^0-9]\n" +
		litTok + ` writer lit\*,lit\?` + "\n" +
		adminToken + " admin *\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for i, c := range []struct {
		tok, ns string
		allowed bool
	}{
		{teamTok, "team/a", true},
		{teamTok, "team/a/b", true},
		{teamTok, "team", false},
		{scanTok, "scan-1", true},
		{scanTok, "scan-/", true},
		{scanTok, "scan-12", false},
		{scanTok, "scan-?", true}, // ? matches "?" too
		{shardTok, "shard-2", true},
		{shardTok, "shard-x", true},
		{shardTok, "shard-7", false},
		{shardTok, "shard-[0-3]", false},
		{litTok, "lit*", true},
		{litTok, "lit?", true},
		{litTok, "litx", false},
		{litTok, `lit\x`, false},
		{adminToken, "team/a", true},
		{adminToken, "a/b/c", true},
	} {
		// A key of its own for each case: a 409 would say nothing of the token.
		body, _ := json.Marshal(map[string]string{"namespace": c.ns, "key": fmt.Sprint("k", i), "owner": "o", "ttl": "30s"})
		r := send(t, "POST", s.url+"/v1/acquire", string(body), "Authorization", "Bearer "+c.tok)
		want := 403
		if c.allowed {
			want = 200
		}
		if r.code != want {
			t.Errorf("the token %s acquiring in namespace %q: HTTP %d, want %d\n%s", c.tok, c.ns, r.code, want, r.body)
		}
	}
}

// A malformed namespace glob in a tokens file (an unclosed class, a
// trailing "\") is refused with the file, naming the glob, as serve
// --lock-delay refuses one: read as literal text it would grant a
// namespace nobody meant.
func TestParseTokensRefusesAMalformedGlob(t *testing.T) {
	t.Parallel()
	for _, glob := range []string{"shard-[", "shard-[]", "shard-[a-", `shard-\`, "ok,shard-["} {
		_, err := httpapi.ParseTokens(strings.NewReader("abcdefghijklmnopqrstuvwxyz reader " + glob + "\n"))
		if err == nil {
			t.Errorf("ParseTokens with the glob %q: parsed, want it refused", glob)
			continue
		}
		bad := glob[strings.LastIndexByte(glob, ',')+1:]
		if !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "abcdefghijklmnopqrstuvwxyz") {
			t.Errorf("ParseTokens with the glob %q: %v; want an error naming the glob and not the token", glob, err)
		}
	}
}
