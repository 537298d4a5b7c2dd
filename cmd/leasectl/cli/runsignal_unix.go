//go:build unix

package cli

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is sig's name (SIGKILL), or its description when it has none.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return sig.String()
}
