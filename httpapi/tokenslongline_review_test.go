package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// "# starts a comment, to the end of the line" (ParseTokens; DESIGN.md's
// tokens file grammar), and the errors of a tokens file name the line.
// A comment line of 70,000 bytes (a pasted certificate, a generated
// header) is a comment like any: the file's tokens must load. ParseTokens
// reads lines with a bufio.Scanner of 64 KiB lines, so the whole file is
// refused with "bufio.Scanner: token too long", which names no line and
// speaks of a "token" the line does not hold.
func TestTokensFileWithALongCommentLineLoads(t *testing.T) {
	t.Parallel()
	file := "# " + strings.Repeat("c", 70000) + "\n" + adminToken + " admin *\n"
	toks, err := httpapi.ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatalf("tokens file of a 70,002-byte comment line and one token: %v; want its one token loaded", err)
	}
	if toks.Len() != 1 {
		t.Fatalf("tokens file of a 70,002-byte comment line and one token: %d tokens, want 1", toks.Len())
	}
}
