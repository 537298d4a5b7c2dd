package cli

import (
	"strings"
	"testing"
)

// TestAuditNextPageHintKeepsTheKey: the "more:" line of audit --key
// NS/NAME is the command for the next page of that key's records. The key
// filter is read into the namespace and the name, and the hint repeated
// --key with the name alone, without the namespace: pasted, it read NAME
// in the default namespace (another key) and printed "no audit records".
func TestAuditNextPageHintKeepsTheKey(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	acq := runCLI(t, e, "acquire", "scan/k", "--owner", "w", "-o", "json")
	wantCode(t, acq, 0)
	tok := itoa(token(t, acq.json(t)))
	wantCode(t, runCLI(t, e, "renew", "scan/k", "--owner", "w", "--token", tok), 0)
	wantCode(t, runCLI(t, e, "acquire", "default-k", "--owner", "w"), 0) // a record of another key, in the default namespace
	first := runCLI(t, e, "audit", "--key", "scan/k", "--limit", "1")
	wantCode(t, first, 0)
	if !strings.Contains(first.stdout, " renew ") {
		t.Fatalf("first page of audit --key scan/k --limit 1 (newest first):\n%s", first.stdout)
	}
	args := nextHint(t, first.stdout)
	next := runCLI(t, e, args...)
	wantCode(t, next, 0)
	if !strings.Contains(next.stdout, " acquire ") || !strings.Contains(next.stdout, "scan") {
		t.Fatalf("the hint %v of audit --key scan/k printed:\n%s\nwant the acquire record of scan/k, the page after the first", args, next.stdout)
	}
}
