package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneBeforeTheZeroTimeIsRefusedForWhatItIs: `audit prune --before
// 0001-01-01T00:00:00Z --yes` is given a cut-off, the earliest time there
// is (Go's zero time, what a script prints for a time it never set), so it
// is not told that a cut-off is required: it is refused (exit 2) saying
// that no record is older, so that the prune would remove nothing, and
// asking for the cut-off meant; likewise a cut-off before it
// (0001-01-01T00:00:00+01:00). Nothing is written: the trail keeps its
// records and gets no prune record, and no store is created. It said
// "prune: a cut-off time is required".
func TestPruneBeforeTheZeroTimeIsRefusedForWhatItIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "prune.db")}
	result(t, c.runJSON(t, 0, "acquire", "k", "--owner", "o"), "acquired")
	for _, before := range []string{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"} {
		args := []string{"audit", "prune", "--before", before, "--yes"}
		r := c.run(t, args...)
		if r.code != 2 || strings.Contains(r.stderr, "required") || !strings.Contains(r.stderr, before) ||
			!strings.Contains(r.stderr, "remove nothing") {
			t.Errorf("prune before %s: want exit 2 naming the cut-off and that it would remove nothing, not that a "+
				"cut-off is required\n%s", before, r)
		}
		m := c.runJSON(t, 2, args...)
		if msg, _ := m["message"].(string); m["status"] != "invalid" || strings.Contains(msg, "required") ||
			!strings.Contains(msg, "remove nothing") {
			t.Errorf("prune before %s in JSON: %v, want status invalid saying it would remove nothing", before, m)
		}
	}
	recs := c.runJSON(t, 0, "audit", "-n", "")["records"].([]any)
	if len(recs) != 1 || recs[0].(map[string]any)["op"] != "acquire" {
		t.Errorf("after the refused prunes the trail holds %v, want the acquire's record alone", recs)
	}

	fresh := leasectl{dir: t.TempDir()} // the default DSN, sqlite:leasestore.db, not there yet
	if r := fresh.run(t, "audit", "prune", "--before", "0001-01-01T00:00:00Z", "--yes"); r.code != 2 {
		t.Errorf("prune before the zero time with no store: want exit 2\n%s", r)
	}
	if entries, _ := os.ReadDir(fresh.dir); len(entries) != 0 {
		t.Errorf("a refused prune left %v in %s", entries, fresh.dir)
	}
}
