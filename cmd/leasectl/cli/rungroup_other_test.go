//go:build !unix

package cli

// aliveProbe does nothing where process groups do not exist.
func aliveProbe() bool { return false }

// pausedRead does nothing where the tests that use it do not run.
func pausedRead() bool { return false }
