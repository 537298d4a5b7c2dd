//go:build unix

package pgbouncer

import (
	"os/exec"
	"syscall"
)

// runAsNobody makes cmd run as nobody (uid and gid 65534): pgbouncer
// refuses to run as root.
func runAsNobody(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}
