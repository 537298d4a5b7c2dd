package httpapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// tokensFileLimit is the documented limit of a tokens file, 16 MiB
// (httpapi.MaxTokensFileBytes).
const tokensFileLimit = 16 << 20

// A --tokens path that names a huge file by mistake (a database file, a
// log) is refused once it passes 16 MiB, naming the file and the limit,
// instead of read whole into memory; a file of exactly the limit loads.
func TestTokensFileOverTheSizeLimitIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line := writerToken + " writer scan\n"
	write := func(name string, size int) string {
		t.Helper()
		pad := size - len(line) - 1 // "#" + padding, then the token's line
		content := "#" + strings.Repeat("x", pad-1) + "\n" + line
		if len(content) != size {
			t.Fatalf("test file of %d bytes, want %d", len(content), size)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	atLimit := write("at-limit", tokensFileLimit)
	if toks, err := httpapi.LoadTokens(atLimit); err != nil || toks.Len() != 1 {
		t.Fatalf("tokens file of exactly %d bytes: %v; want its one token loaded", tokensFileLimit, err)
	}
	over := write("over-limit", tokensFileLimit+1)
	_, err := httpapi.LoadTokens(over)
	if err == nil || !strings.Contains(err.Error(), over) || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("tokens file of %d bytes: %v; want it refused, naming the file and the limit of 16 MiB", tokensFileLimit+1, err)
	}
}
