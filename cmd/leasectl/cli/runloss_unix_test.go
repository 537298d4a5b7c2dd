//go:build unix

package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// The bearer tokens of servedForRun's store.
const (
	runWriterToken = "run-writer-0123456789"
	runAdminToken  = "run-admin-0123456789"
)

// servedForRun serves a SQLite store in dir over HTTP (in this process)
// and returns its URL. The writer token is accepted until a file named
// "withdrawn" appears in dir (as after its removal from a tokens file and
// a reload); the admin token always. With deaf, the server refuses every
// notification stream (503), as one whose --max-streams are open does:
// run then hears a loss only from a renewal or its release.
func servedForRun(t *testing.T, dir string, deaf bool) string {
	t.Helper()
	tg, err := parseDSN("sqlite:" + filepath.Join(dir, "served.db"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &app{getenv: env{}.get, log: quiet, red: newRedactor(), timeout: 5 * time.Second}
	s, err := a.openTarget(t.Context(), tg, openOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(a) })
	both, err := httpapi.ParseTokens(strings.NewReader(runWriterToken + " writer *\n" + runAdminToken + " admin *\n"))
	if err != nil {
		t.Fatal(err)
	}
	adminOnly, err := httpapi.ParseTokens(strings.NewReader(runAdminToken + " admin *\n"))
	if err != nil {
		t.Fatal(err)
	}
	withdrawn := filepath.Join(dir, "withdrawn")
	h, err := httpapi.NewHandler(s.rt, s.audit, &httpapi.Config{Logger: quiet, Tokens: func() *httpapi.Tokens {
		if _, err := os.Stat(withdrawn); err == nil {
			return adminOnly
		}
		return both
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deaf && strings.HasPrefix(r.URL.Path, "/v1/notify/") {
			http.Error(w, `{"status":"unavailable","message":"too many streams"}`, http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRunWhoseTokenIsWithdrawnBeforeItsReleaseExits7: a served store that
// stops accepting run's bearer token while CMD runs, CMD ending (0) before
// the next renewal, refuses the release with 401. That is the loss run's
// help names ("the loss is the same and run exits 7, naming
// LEASESTORE_API_TOKEN") and a renewal refused so ends in: the lease,
// which run can no longer renew or release, stays in the store until it
// runs out. run exited 0 with a warning that the release failed.
func TestRunWhoseTokenIsWithdrawnBeforeItsReleaseExits7(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env{EnvDSN: servedForRun(t, dir, false), EnvAPIToken: runWriterToken}
	o := runCLI(t, e, "run", "k", "--owner", "w", "--", "sh", "-c", `touch "$0"`, filepath.Join(dir, "withdrawn"))
	wantCode(t, o, ExitAuth)
	if !strings.Contains(o.stderr, EnvAPIToken) {
		t.Fatalf("run does not name %s\nstderr: %s", EnvAPIToken, o.stderr)
	}
}
