//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// pausedReadEnv names the operation after which pausedRead pauses.
const pausedReadEnv = "LEASESTORE_TEST_PAUSE_AFTER"

// pausedRead, in the copy of this test binary that pauseRead starts, runs
// leasectl with the process's arguments, pausing after the first
// operation named in pausedReadEnv: it says so on file descriptor 3 and
// goes on once a line comes on stdin. It exits with leasectl's exit code.
// Elsewhere it does nothing and reports false.
func pausedRead() bool {
	op := os.Getenv(pausedReadEnv)
	if op == "" {
		return false
	}
	paused, resume := os.NewFile(3, "paused"), bufio.NewReader(os.Stdin)
	var once sync.Once
	testObserver = protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if string(ev.Op) == op {
			once.Do(func() {
				fmt.Fprintln(paused, "paused after", op)
				_, _ = resume.ReadString('\n')
			})
		}
	})
	os.Exit(Execute(context.Background(), os.Args[1:], nil, os.Stdout, os.Stderr, os.Getenv))
	return true
}

// pauseRead runs leasectl with args as user nobody, pausing it after its
// first operation op (see pausedRead) while meanwhile runs, and returns
// its outcome. It fails when leasectl ends without making op.
func pauseRead(t *testing.T, op protocol.Op, meanwhile func(), args ...string) outcome {
	t.Helper()
	probe, dir := nobodysCopy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, probe, args...)
	cmd.Dir = dir
	cmd.Env = []string{pausedReadEnv + "=" + string(op)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	resume, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pausedR, pausedW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pausedR.Close()
	cmd.ExtraFiles = []*os.File{pausedW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pausedW.Close()
	if _, err := bufio.NewReader(pausedR).ReadString('\n'); err != nil {
		_ = cmd.Wait()
		t.Fatalf("leasectl %v ended without a %s operation: %v\nstdout: %s\nstderr: %s", args, op, err, &stdout, &stderr)
	}
	meanwhile()
	if _, err := resume.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	_ = resume.Close()
	o := outcome{}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); errors.As(err, &exitErr) {
		o.code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	o.stdout, o.stderr = stdout.String(), stderr.String()
	return o
}

// A user who may read a SQLite store but not write its directory
// describes a key while no process has the store open (no -wal file), so
// leasectl reads the file immutable=1, without locks. Between describe's
// two reads (the lease, then the key's audit records) the lease's owner
// releases it and another owner takes it, in processes that checkpoint
// their commits into the file as they close it. describe printed w1's
// lease (token 1) beside records that end with w2's acquire of token 2,
// exit 0: a state the store was never in. It must print one state, or
// fail (exit 5) saying the file changed while read and what to do.
func TestReadOnlyDescribeBesideWriterIsOneState(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leasectl as another user (nobody)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "leases.db")
	e := env{EnvDSN: "sqlite:" + path}
	if o := runCLI(t, e, "acquire", "k", "--owner", "w1"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	// nobody reads the directory and the 0644 file, and writes neither.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("a -wal file is left after the writer exited")
	}
	o := pauseRead(t, protocol.OpGet, func() {
		if o := runCLI(t, e, "release", "k", "--owner", "w1", "--token", "1"); o.code != 0 {
			t.Fatalf("release: %+v", o)
		}
		if o := runCLI(t, e, "acquire", "k", "--owner", "w2"); o.code != 0 {
			t.Fatalf("acquire by w2: %+v", o)
		}
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Fatal("a -wal file is left after the writers exited: their commits are not in the file yet")
		}
	}, "describe", "k", "-o", "json", "--timeout", "1m", "--dsn", "sqlite:"+path)

	if o.code == 0 {
		var got struct {
			Lease struct {
				Owner string `json:"owner"`
				Token int64  `json:"token"`
			} `json:"lease"`
			Records []struct {
				Op    string `json:"op"`
				Owner string `json:"owner"`
				Token int64  `json:"token"`
			} `json:"records"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &got); err != nil || len(got.Records) == 0 {
			t.Fatalf("describe -o json: %v\n%+v", err, o)
		}
		// One state: the live lease is the one the key's last record took.
		last := got.Records[len(got.Records)-1]
		if last.Op != "acquire" || last.Owner != got.Lease.Owner || last.Token != got.Lease.Token {
			t.Fatalf("describe by a user who cannot write the store's directory, read without locks while "+
				"another process wrote the file: exit 0 printing %s's lease (token %d) beside records ending "+
				"with %s by %s (token %d), two states of the store; want one state, or exit 5 saying the file "+
				"changed\n%+v", got.Lease.Owner, got.Lease.Token, last.Op, last.Owner, last.Token, o)
		}
		return
	}
	// Nothing read printed: a failure keeps describe's shape (failureJSON),
	// with no lease and no records in it.
	var printed struct {
		Lease   json.RawMessage   `json:"lease"`
		Records []json.RawMessage `json:"records"`
	}
	_ = json.Unmarshal([]byte(o.stdout), &printed)
	if o.code != 5 || len(printed.Records) > 0 || (len(printed.Lease) > 0 && string(printed.Lease) != "null") {
		t.Fatalf("describe beside a writer: exit %d, want 0 with one state or 5 with nothing read printed\n%+v", o.code, o)
	}
	for _, want := range []string{"changed while", "again", "write access to the file and its directory"} {
		if !strings.Contains(o.stdout+o.stderr, want) { // -o json: the failure is the JSON answer
			t.Errorf("describe stopped without saying %q\n%+v", want, o)
		}
	}
}
