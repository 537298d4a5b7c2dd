//go:build !unix

package cli

import (
	"io"
	"os"
	"os/exec"
)

// commandGroup is run's command alone where process groups do not exist:
// signals reach CMD only, not what it started. Not safe for concurrent use.
type commandGroup struct{ p *os.Process }

func (g *commandGroup) prepare(*exec.Cmd, io.Reader) {}

func (g *commandGroup) started(p *os.Process) { g.p = p }

func (g *commandGroup) signal(sig os.Signal) {
	if g.p != nil {
		_ = g.p.Signal(sig)
	}
}

// alive is false: CMD has ended when it is asked, and what it started is
// out of reach.
func (g *commandGroup) alive() bool { return false }
