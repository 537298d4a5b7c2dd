package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/putback"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// cliWorkerEnv makes TestMain run leasectl with the arguments it holds (a
// JSON array) instead of the tests, and exit with its code (see cliWorker).
const cliWorkerEnv = "LEASESTORE_TEST_CLI_WORKER"

// cliWorker runs leasectl as a process of its own when cliWorkerEnv is
// set: a SQLite backend whose file was put back under it keeps a
// connection to it open until the process exits (sqlite's fileGuard), by
// design, which the leak check of an in-process run would take for a leak.
func cliWorker() bool {
	v := os.Getenv(cliWorkerEnv)
	if v == "" {
		return false
	}
	var args []string
	if err := json.Unmarshal([]byte(v), &args); err != nil {
		panic(err)
	}
	os.Exit(Execute(context.Background(), args, nil, os.Stdout, os.Stderr, os.Getenv))
	return true
}

// TestFollowEndsWhenTheFileIsPutBack: audit --follow and watch on a SQLite
// file that is put back from a copy under them meet a refusal no retry
// mends (the follower's backend refuses every operation until it is
// restarted): they end at once with exit 5 (unavailable), naming the fix
// (restart), rather than logging "read failed; retrying" every interval
// for ever.
func TestFollowEndsWhenTheFileIsPutBack(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	t.Parallel()
	for _, args := range [][]string{{"audit", "--follow", "--since", "1h"}, {"watch", "--since", "1h"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "leases.db")
			e := env{EnvDSN: "sqlite:" + path}
			wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
			backup, err := os.ReadFile(path) // leasectl closed it: checkpointed
			if err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			full := append(args, "--interval", "50ms")
			js, err := json.Marshal(full)
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr syncbuf.Buffer
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), cliWorkerEnv+"="+string(js), EnvDSN+"=sqlite:"+path)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			for !strings.Contains(stdout.String(), "acquire") { // following
				select {
				case err := <-done:
					t.Fatalf("%v ended (%v) before printing the acquire\nstderr: %s", full, err, stderr.String())
				case <-ctx.Done():
					<-done
					t.Fatalf("%v printed no acquire within 10s\nstderr: %s", full, stderr.String())
				case <-time.After(10 * time.Millisecond):
				}
			}

			putback.File(t, path, backup)
			<-done
			if code := cmd.ProcessState.ExitCode(); ctx.Err() != nil || code != 5 {
				t.Fatalf("%v after the file was put back: exit %d (context: %v), want 5 at once\nstderr: %s", full, code, ctx.Err(), stderr.String())
			}
			if !strings.Contains(stderr.String(), "restart") {
				t.Errorf("%v: stderr does not name the fix (restart):\n%s", full, stderr.String())
			}
			if n := strings.Count(stderr.String(), "retrying"); n > 1 {
				t.Errorf("%v: logged %d retries of a refusal no retry mends:\n%s", full, n, stderr.String())
			}
		})
	}
}
