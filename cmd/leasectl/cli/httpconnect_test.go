package cli

import (
	"net"
	"strings"
	"testing"
)

// An http(s) DSN whose host and port nothing answers at (no `leasectl
// serve` running there, a wrong port, a host that does not resolve) is
// refused naming what to check, as a PostgreSQL DSN's is (exit 5). It said
// "httpapi: the server could not be reached" and the transport's words
// only.
func TestHTTPUnreachableNamesTheFix(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	for dsn, hostPort := range map[string]string{
		"http://" + free:                              free,
		"https://" + free + "/prefix":                 free,
		"http://leasestore-no-such-host.invalid:7070": "leasestore-no-such-host.invalid:7070",
	} {
		for _, args := range [][]string{{"get", "k"}, {"health"}} {
			o := runCLI(t, env{}, append(args, "--dsn", dsn, "--timeout", "3s")...)
			wantCode(t, o, ExitUnavailable)
			for _, w := range []string{"could not be reached at " + hostPort, "host and port", "leasectl serve", "runs and listens there"} {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("%s --dsn %s: stderr %q lacks %q", strings.Join(args, " "), dsn, o.stderr, w)
				}
			}
		}
	}
}
