package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The next_cursor of list -A given to list without -A is invalid input
// whose message names the fix (pass -A), not only "not a list cursor".
func TestListAllCursorWithoutAllNamespacesNamesTheFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	for _, ns := range []string{"ns1", "ns2"} {
		c.runJSON(t, 0, "acquire", "k", "-n", ns, "--owner", "w", "--ttl", "1h")
	}
	cursor, _ := c.runJSON(t, 0, "list", "-A", "--limit", "1")["next_cursor"].(string)
	if cursor == "" {
		t.Fatal("list -A --limit 1 over two namespaces printed no next_cursor")
	}
	for _, args := range [][]string{{"list", "--cursor", cursor}, {"list", "-n", "ns2", "--cursor", cursor}} {
		m := c.runJSON(t, 2, args...)
		if msg, _ := m["message"].(string); m["status"] != "invalid" || !strings.Contains(msg, "-A") {
			t.Errorf("%v with the cursor of list -A: %v, want status invalid and a message naming -A", args, m)
		}
	}
}
