package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// On a terminal, progress rewrites one line in place and leaves it blank
// when done; anywhere else there is no progress line (the log gets a line
// per tick instead); TERM=dumb counts as no terminal.
func TestProgressLine(t *testing.T) {
	t.Parallel()
	a := &app{getenv: func(string) string { return "" }, red: newRedactor()}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	p := a.newProgressLine(tty)
	if p == nil {
		t.Fatal("no progress line on a terminal")
	}
	var out bytes.Buffer
	p.w = &out
	p.show("bench: 1s, 10 ops")
	p.show("bench: 2s, 20 ops")
	p.done()
	if got := out.String(); got != clearLine+"bench: 1s, 10 ops"+clearLine+"bench: 2s, 20 ops"+clearLine || strings.Contains(got, "\n") {
		t.Fatalf("terminal output %q", got)
	}

	dumb := &app{getenv: func(k string) string {
		if k == "TERM" {
			return "dumb"
		}
		return ""
	}, red: newRedactor()}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, got := range map[string]*progressLine{
		"a file":          a.newProgressLine(f),
		"a buffer":        a.newProgressLine(&out),
		"a dumb terminal": dumb.newProgressLine(tty),
	} {
		if got != nil {
			t.Errorf("a progress line on %s", name)
		}
		if got.show("x") {
			t.Errorf("a nil progress line showed text (%s)", name)
		}
		got.done()
	}
}
