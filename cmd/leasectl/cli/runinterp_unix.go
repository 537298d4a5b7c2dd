//go:build unix

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// shebangMax is how much of a script the kernel reads for its #! line
// (Linux's BINPRM_BUF_SIZE): an interpreter named past it is left to the
// start to refuse.
const shebangMax = 256

// interpreterDepth bounds the chain of scripts whose interpreter is a
// script that checkInterpreter follows (Linux runs four).
const interpreterDepth = 4

// checkInterpreter returns why the script at path (CMD as exec.LookPath
// found it) cannot start because of the interpreter its #! line names: it
// does not exist (an error matching fs.ErrNotExist: exit 127, as a shell
// reports a bad interpreter), or is not executable (126: also a file, CMD
// or an interpreter, that is not a regular file, such as a named pipe,
// which the kernel does not execute); nil when path
// is no script, or its interpreter can be executed (that interpreter's own
// #! line is followed too). A file that is no script, CMD itself or the
// last interpreter, must be in a format the system executes (checkFormat:
// exec format error, 126). run asks before it takes the lease, so that a
// CMD that cannot start takes none, as a missing CMD takes none.
func checkInterpreter(path string) error {
	script := path
	for range interpreterDepth {
		// The kernel executes regular files only (permission denied), and
		// reading the #! line of a named pipe would wait for a writer.
		if st, err := os.Stat(script); err == nil && !st.Mode().IsRegular() {
			if script == path {
				return &fs.PathError{Op: "exec", Path: path, Err: syscall.EACCES}
			}
			return fmt.Errorf("%s: bad interpreter %q (its #! line): %w", path, script, syscall.EACCES)
		}
		interp := shebang(script)
		if interp == "" {
			err := checkFormat(script)
			var pe *fs.PathError
			switch {
			case err == nil:
				return nil
			case script == path:
				return err
			case errors.As(err, &pe):
				err = pe.Err
			}
			return fmt.Errorf("%s: bad interpreter %q (its #! line): %w", path, script, err)
		}
		st, err := os.Stat(interp)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			return fmt.Errorf("%s: bad interpreter %q (its #! line): %w", path, interp, pe.Err)
		case err != nil:
			return fmt.Errorf("%s: bad interpreter %q (its #! line): %w", path, interp, err)
		case st.IsDir() || syscall.Access(interp, 1 /* X_OK */) != nil:
			return fmt.Errorf("%s: bad interpreter %q (its #! line): %w", path, interp, syscall.EACCES)
		}
		script = interp
	}
	return nil
}

// shebang returns the interpreter the #! line of the file at path names,
// as the kernel reads it (after optional blanks, up to a blank or the end
// of the line); "" when the file is no script or cannot be read.
func shebang(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, shebangMax)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return ""
	}
	line, ok := bytes.CutPrefix(buf[:n], []byte("#!"))
	if !ok {
		return ""
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else if n == shebangMax {
		return "" // the line goes on past what the kernel reads
	}
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t"); i >= 0 {
		line = line[:i]
	}
	return string(line)
}
