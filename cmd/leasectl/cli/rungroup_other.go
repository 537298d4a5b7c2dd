//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

// forwardedSignals are passed on to run's command: those this system
// delivers to a process.
var forwardedSignals = []os.Signal{os.Interrupt}

// stopSignals interrupt run until its command starts beside the interrupt
// main handles: none here.
var stopSignals []os.Signal

// commandGroup is run's command alone where process groups do not exist:
// signals reach CMD only, not what it started. Not safe for concurrent use.
type commandGroup struct{ p *os.Process }

func (g *commandGroup) prepare(*exec.Cmd) {}

func (g *commandGroup) started(p *os.Process) { g.p = p }

// forwards is true: every signal run catches is passed on.
func (g *commandGroup) forwards(os.Signal) bool { return true }

func (g *commandGroup) signal(sig os.Signal) {
	if g.p != nil {
		_ = g.p.Signal(sig)
	}
}

// alive is false: CMD has ended when it is asked, and what it started is
// out of reach.
func (g *commandGroup) alive() bool { return false }
