package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// exportLines decodes the JSON lines of audit export.
func exportLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestAuditExportAndPrune runs the retention commands on both dialects:
// export prints every record as a JSON line, oldest first, and resumes
// after a cursor; prune refuses without --yes or --before and writes
// nothing, refuses a cut-off after the store's time, removes only older
// records with --yes, and is recorded.
func TestAuditExportAndPrune(t *testing.T) {
	for name, e := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e(t)
			acq := runCLI(t, e, "acquire", "k", "--owner", "w", "-o", "json")
			wantCode(t, acq, 0)
			wantCode(t, runCLI(t, e, "release", "k", "--owner", "w", "--token", itoa(token(t, acq.json(t)))), 0)
			time.Sleep(20 * time.Millisecond)
			cut := time.Now().UTC().Format(time.RFC3339Nano)
			time.Sleep(20 * time.Millisecond)
			wantCode(t, runCLI(t, e, "acquire", "later", "--owner", "w"), 0)

			// Export reads as a follower: on PostgreSQL a record may be held
			// back for a moment behind a transaction of another test in the
			// cluster, and export then stops before it (saying so).
			var recs []map[string]any
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				out := runCLI(t, e, "audit", "export")
				wantCode(t, out, 0)
				if recs = exportLines(t, out.stdout); len(recs) == 3 || time.Now().After(deadline) {
					break
				}
			}
			if len(recs) != 3 || recs[0]["op"] != "acquire" || recs[1]["op"] != "release" || recs[2]["key"] != "later" {
				t.Fatalf("export: %v", recs)
			}
			resume := runCLI(t, e, "audit", "export", "--cursor", "a1."+itoa(int64(recs[0]["id"].(float64))))
			if got := exportLines(t, resume.stdout); len(got) != 2 || got[0]["id"] != recs[1]["id"] {
				t.Fatalf("export resumed after the first record: %v", got)
			}

			for _, args := range [][]string{
				{"audit", "prune", "--before", cut},
				{"audit", "prune", "--yes"},
				{"audit", "prune", "--before", "soon", "--yes"},
				// A cut-off after the store's time would remove the records
				// that just committed, so their retries could not replay.
				{"audit", "prune", "--before", "2099-01-01T00:00:00Z", "--yes"},
			} {
				r := runCLI(t, e, args...)
				wantCode(t, r, 2)
			}
			if got := exportLines(t, runCLI(t, e, "audit", "export").stdout); len(got) != 3 {
				t.Fatalf("refused prunes removed records: %d left", len(got))
			}

			pr := runCLI(t, e, "audit", "prune", "--before", cut, "--yes", "--actor", "ops", "-o", "json")
			wantCode(t, pr, 0)
			m := pr.json(t)
			if m["status"] != "pruned" || m["removed"] != float64(2) {
				t.Fatalf("prune: %v", m)
			}
			// The prune's own record may be held back for a moment too.
			var left []map[string]any
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				// The prune's record is in no namespace: -A exports it.
				if left = exportLines(t, runCLI(t, e, "audit", "export", "-A").stdout); len(left) >= 2 || time.Now().After(deadline) {
					break
				}
			}
			if len(left) != 2 || left[0]["key"] != "later" || left[1]["op"] != "prune" || left[1]["actor"] != "ops" {
				t.Fatalf("after prune: %v", left)
			}
		})
	}
}

// TestAuditExportDefaultNamespace: export's -n defaults to default, as
// every command's does (DESIGN.md); -A (or -n "") exports every namespace.
// It exported every namespace by default.
func TestAuditExportDefaultNamespace(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, ns := range []string{"default", "billing"} {
		wantCode(t, runCLI(t, e, "acquire", "k", "-n", ns, "--owner", "w"), 0)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"audit", "export"}, []string{"default"}},
		{[]string{"audit", "export", "-n", "billing"}, []string{"billing"}},
		{[]string{"audit", "export", "-A"}, []string{"default", "billing"}},
		{[]string{"audit", "export", "-n", ""}, []string{"default", "billing"}},
	} {
		o := runCLI(t, e, c.args...)
		wantCode(t, o, 0)
		var got []string
		for _, r := range exportLines(t, o.stdout) {
			got = append(got, r["namespace"].(string))
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%q exported namespaces %v, want %v", c.args, got, c.want)
		}
	}
}
