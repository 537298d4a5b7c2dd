package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// With -o json, CMD's stdout (unless a terminal) is a pipe run copies;
// processes CMD leaves running may hold it open, and run copies what they
// write for pipeDelay (1s) after CMD ended, then closes the pipe (their
// later writes get EPIPE/SIGPIPE) and only then stops them. In table mode
// they write straight to run's stdout and are stopped at once. The
// operator guide and run's help say CMD sees a pipe, but not that what
// the processes CMD leaves running print is cut after a second, nor that
// they are stopped that much later: a CMD that backgrounds a writer sees
// its output vanish, undocumented.
func TestRunJSONDocumentsTheCutOfOutputOfProcessesCMDLeavesRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "operator-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	entry := string(guide)
	if i := strings.Index(entry, "- **run**"); i >= 0 {
		entry = entry[i:]
	}
	if i := strings.Index(entry, "\n- **watch**"); i >= 0 {
		entry = entry[:i]
	}
	r := c.run(t, "run", "--help")
	if r.code != 0 {
		t.Fatalf("leasectl run --help: exit %d\n%s", r.code, r)
	}
	// After the sentence saying CMD's stdout is a pipe run copies, the
	// text must say for how long run copies it after CMD ended (1s).
	bound := regexp.MustCompile(`(?s)pipe that run copies.{0,600}?(1 s|1s|one second|a second)`)
	space := regexp.MustCompile(`\s+`)
	for _, doc := range []struct{ what, text string }{{"docs/operator-guide.md (run)", entry}, {"leasectl run --help", r.stdout}} {
		what, text := doc.what, doc.text
		if !bound.MatchString(space.ReplaceAllString(text, " ")) {
			t.Errorf("%s says that with -o json CMD's stdout is a pipe run copies, but not that what processes CMD leaves running print there is cut 1s after CMD ended (and they are stopped only then)", what)
		}
	}
}
