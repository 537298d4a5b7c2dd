//go:build !unix

package cli

import "syscall"

// signalName is sig's description: outside Unix no signal ends a command.
func signalName(sig syscall.Signal) string { return sig.String() }
