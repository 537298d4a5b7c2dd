//go:build !unix

package cli

// checkInterpreter is nil: outside Unix no #! line names a script's
// interpreter.
func checkInterpreter(string) error { return nil }
