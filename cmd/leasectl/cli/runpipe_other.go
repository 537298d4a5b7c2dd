//go:build !linux

package cli

import "os"

// pipeCapacity is maxPipeCapacity outside Linux, which has no call to
// read a pipe's capacity.
func pipeCapacity(*os.File) int64 { return maxPipeCapacity }
