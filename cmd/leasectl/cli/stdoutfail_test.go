package cli

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failingWriter refuses every write with err, as stdout on a full disk
// (ENOSPC) or a closed descriptor (EBADF, leasectl ... >&-) does.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestFailedStdoutIsNotSuccess: a command whose answer could not be
// written to stdout does not exit 0. `token=$(leasectl get k -o token)`
// or `leasectl list -o json > leases.json` on a full disk got exit 0 and
// nothing, and the script went on with an empty token or file. Only a
// reader gone (EPIPE, exit 141) was noticed; any other write error was
// dropped.
func TestFailedStdoutIsNotSuccess(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EBADF} {
		for _, args := range [][]string{
			{"get", "k", "-o", "token"},
			{"get", "k", "-o", "json"},
			{"list"},
			{"version"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var stderr bytes.Buffer
			code := Execute(ctx, args, nil, failingWriter{errno}, &stderr, e.get)
			cancel()
			if code == ExitOK {
				t.Errorf("leasectl %s with stdout failing (%v): exit 0, stderr %q; want a failure",
					strings.Join(args, " "), errno, stderr.String())
			}
		}
	}
}
