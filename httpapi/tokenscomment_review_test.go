package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// The contract (shared DESIGN.md): in the tokens file "`#` starts a
// comment". A comment written straight after the last field, without a
// space (`* # deploy bot` written `*# deploy bot`), loaded at 9969fe5 as
// the glob *. It is now read as the glob "*#" followed by two more fields,
// and the whole file is refused: a working tokens file stops loading (serve
// does not start, a reload keeps the old tokens) after an upgrade.
func TestTokensFileCommentStraightAfterAFieldStillLoads(t *testing.T) {
	t.Parallel()
	const line = writerToken + " writer *# deploy bot\n"
	tokens, err := httpapi.ParseTokens(strings.NewReader(line))
	if err != nil || tokens.Len() != 1 {
		t.Fatalf("tokens file line %q: %v; want it loaded with the glob * (\"# starts a comment\"), as at 9969fe5", line, err)
	}
}
