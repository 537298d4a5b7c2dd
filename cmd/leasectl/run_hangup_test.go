//go:build unix

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRunHangupOrQuitBeforeTheCommandReleases: SIGHUP (the terminal or
// session went away) or SIGQUIT that reaches run before CMD started is an
// interrupt as SIGINT and SIGTERM are: run exits 130 saying interrupted,
// CMD does not start, and the lease run took goes back at once. The
// moments are made exact as in TestRunInterruptedBeforeTheCommandReleases:
// the acquire in flight (its answer held back by a proxy), and the lease
// acquired with the claim's renew in flight (--request-id). Before, the
// signal's default action ended run at once (killed by SIGHUP; SIGQUIT's
// goroutine dump and exit 2), leaving the lease to run out after its TTL
// and then its lock-delay.
func TestRunHangupOrQuitBeforeTheCommandReleases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "leases.db")
	direct := leasectl{dir: dir, dsn: dsn}
	if r := direct.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	srv := startServe(t, dir, dsn, nil)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		id := "hup-" + strconv.Itoa(int(sig))
		for i, tc := range []struct {
			name, path, needle string
			args               []string
			let                bool // pass the held answer on once run has the signal
		}{
			{"acquire in flight", "/v1/acquire", "", nil, false},
			{"claim in flight, --request-id", "/v1/renew", id + "/run", []string{"--request-id", id}, true},
		} {
			t.Run(signalName(sig)+"/"+tc.name, func(t *testing.T) {
				key := id + "-" + strconv.Itoa(i)
				hp := newHoldingProxy(t, srv.url, tc.path, tc.needle)
				args := append([]string{"run", key, "--owner", "w", "--ttl", "1m", "--lock-delay", "1m"}, tc.args...)
				p := (leasectl{dir: dir, dsn: hp.url}).start(t, append(args, "--", "sh", "-c", "echo ran")...)
				hp.awaitCommitted(t, p)
				if err := p.signal(sig); err != nil {
					t.Fatal(err)
				}
				if tc.let {
					awaitSignalTaken(t, p.cmd.Process.Pid, sig)
					close(hp.let)
				}
				code := p.wait()
				if code != 130 || strings.Contains(p.stdout.String(), "ran") || !strings.Contains(p.output(), "interrupted") {
					t.Errorf("run given %s before its command started: exit %d; want 130 saying interrupted, and the command not run\n%s",
						signalName(sig), code, p.output())
				}
				if r := direct.run(t, "get", key, "-o", "json"); r.code != 4 || !strings.Contains(r.stdout, `"lease":null`) {
					t.Errorf("after run was given %s before its command started, the key is not free (get: exit %d, want 4 "+
						"with no lease): %s", signalName(sig), r.code, strings.TrimSpace(r.stdout))
				}
			})
		}
	}
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGHUP {
		return "SIGHUP"
	}
	return "SIGQUIT"
}
