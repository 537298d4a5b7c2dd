//go:build !unix

package pgbouncer

import "os/exec"

// runAsNobody does nothing where there is no root to step down from
// (os.Geteuid answers -1 there, so it is not called).
func runAsNobody(*exec.Cmd) {}
