package main

import (
	"path/filepath"
	"testing"
	"time"
)

// A store served with --audit-retention keeps only the records inside it,
// with no operator: records older than the retention are pruned in the
// background (the prune's own records name the retention actor), and
// records younger than it stay.
func TestServeAuditRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "leases.db")
	c := leasectl{dir: dir, dsn: dsn}
	l := c.runJSON(t, 0, "acquire", "old", "--owner", "w")["lease"].(map[string]any)
	c.runJSON(t, 0, "release", "old", "--owner", "w", "--token", tok(l))
	time.Sleep(2500 * time.Millisecond) // the two records are now older than the retention

	startServe(t, dir, dsn, nil, "--audit-retention", "2s")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var old, pruned int
		for _, r := range c.runJSON(t, 0, "audit", "-n", "")["records"].([]any) {
			rec := r.(map[string]any)
			switch {
			case rec["key"] == "old":
				old++
			case rec["op"] == "prune" && rec["actor"] == "leasestore-retention":
				pruned++
			}
		}
		if old == 0 && pruned > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after serve --audit-retention 2s started: %d records of the old key, %d prune records", old, pruned)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A record inside the retention stays.
	c.runJSON(t, 0, "acquire", "new", "--owner", "w")
	if n := len(c.runJSON(t, 0, "audit", "--key", "new")["records"].([]any)); n != 1 {
		t.Fatalf("the new key's record: %d records", n)
	}
}
