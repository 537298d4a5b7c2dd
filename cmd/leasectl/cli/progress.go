package cli

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// progressLine shows a command's progress on one line of a terminal,
// rewritten in place. It is nil (and its methods do nothing) when the
// writer is not a terminal: progress then goes to the log, a line each.
type progressLine struct {
	w     io.Writer
	shown bool
}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// newProgressLine returns a progress line on w when w is a terminal (and
// TERM is not "dumb"), else nil.
func (a *app) newProgressLine(w io.Writer) *progressLine {
	f, ok := w.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) || a.getenv("TERM") == "dumb" {
		return nil
	}
	return &progressLine{w: &redactingWriter{w: w, r: a.red}}
}

// show replaces the line with text. It reports whether it showed it (false
// on a nil progressLine).
func (p *progressLine) show(text string) bool {
	if p == nil {
		return false
	}
	_, _ = io.WriteString(p.w, clearLine+text)
	p.shown = true
	return true
}

// done erases the line, so that what follows starts on a clean line.
func (p *progressLine) done() {
	if p == nil || !p.shown {
		return
	}
	_, _ = io.WriteString(p.w, clearLine)
	p.shown = false
}
