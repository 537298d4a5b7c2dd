package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// The test binary re-executes itself as a worker process when workerEnv is
// set (see TestMain); the other variables configure the worker.
const (
	workerEnv      = "LEASESTORE_SQLITE_TEST_WORKER" // the worker mode: "hammer"
	workerFileEnv  = "LEASESTORE_SQLITE_TEST_FILE"
	workerOwnerEnv = "LEASESTORE_SQLITE_TEST_OWNER"
	workerCycles   = 150              // acquire attempts per goroutine
	workerThreads  = 2                // goroutines per worker process
	workerOvertime = 20 * time.Second // see runWorker
)

// hammerKeys are the few keys the workers fight over.
var hammerKeys = []string{"k0", "k1", "k2"}

// runWorker runs a worker process and returns its exit code. The hammer
// worker opens the file, prints "ready", waits for a line on stdin, then
// from workerThreads goroutines acquires the hammer keys in turn as
// owner "<owner>/<goroutine>", renews every third lease it gets, and
// releases each, printing "acquired=N conflicts=M" at the end. Any outcome
// other than acquired, conflict, renewed or released is a failure.
func runWorker(mode string) int {
	if mode != "hammer" {
		fmt.Fprintf(os.Stderr, "worker: unknown mode %q\n", mode)
		return 2
	}
	ctx := context.Background()
	b, err := sqlite.Open(ctx, os.Getenv(workerFileEnv), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: open: %v\n", err)
		return 1
	}
	rt := protocol.New(b, &protocol.Config{DefaultTimeout: 30 * time.Second})
	defer rt.Close(ctx)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "worker: waiting for the start signal: %v\n", err)
		return 1
	}

	owner := os.Getenv(workerOwnerEnv)
	var mu sync.Mutex
	var acquired, conflicts int
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// Each goroutine makes workerCycles attempts, and goes on (for at most
	// workerOvertime) while its process has met no conflict yet: on a loaded
	// machine the other process may start late, and the test is about the
	// two competing.
	start := time.Now()
	noConflictYet := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return conflicts == 0 && time.Since(start) < workerOvertime
	}
	var wg sync.WaitGroup
	for g := range workerThreads {
		wg.Go(func() {
			me := fmt.Sprintf("%s/%d", owner, g)
			for i := 0; i < workerCycles || noConflictYet(); i++ {
				k := protocol.Key{Namespace: "hammer", Name: hammerKeys[(i+g)%len(hammerKeys)]}
				res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: me, TTL: time.Minute})
				switch res.Status {
				case protocol.StatusAcquired:
				case protocol.StatusConflict:
					mu.Lock()
					conflicts++
					mu.Unlock()
					continue
				default:
					fail("acquire %s: %v", k, err)
					return
				}
				mu.Lock()
				acquired++
				mu.Unlock()
				tok := res.Lease.Token
				if i%3 == 0 {
					if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: k, Owner: me, Token: tok, TTL: time.Minute}); err != nil {
						fail("renew %s token %d: %v", k, tok, err)
						return
					}
				}
				if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: me, Token: tok}); err != nil {
					fail("release %s token %d: %v", k, tok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(failures, "\n"))
		return 1
	}
	fmt.Printf("acquired=%d conflicts=%d\n", acquired, conflicts)
	return 0
}

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
}

func startWorker(t *testing.T, path, owner string) *worker {
	t.Helper()
	return startWorkerMode(t, path, owner, "hammer")
}

// startWorkerMode starts this test binary as a worker process in mode
// (workerEnv) on the file at path, as owner; it is killed when the test
// ends unless it exited.
func startWorkerMode(t *testing.T, path, owner, mode string) *worker {
	t.Helper()
	w := &worker{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	w.cmd.Env = append(os.Environ(), workerEnv+"="+mode, workerFileEnv+"="+path, workerOwnerEnv+"="+owner)
	w.cmd.Stderr = &w.stderr
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.stdout = bufio.NewReader(out)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	})
	return w
}

func (w *worker) line(t *testing.T) string {
	t.Helper()
	s, err := w.stdout.ReadString('\n')
	if err != nil {
		_ = w.cmd.Wait()
		t.Fatalf("worker %d: reading its output: %v; stderr:\n%s", w.cmd.Process.Pid, err, w.stderr.String())
	}
	return strings.TrimSpace(s)
}

// Two OS processes hammer one file with acquires, renews and releases of
// the same few keys. The audit trail, in commit order, must show for every
// key at most one holder at any time (acquire and release alternate, and
// renew and release name the current holder and token), fencing tokens
// strictly increasing, and exactly the acquisitions the workers saw.
func TestTwoProcessesHammerOneFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes")
	}
	path := migratedFile(t)
	workers := []*worker{startWorker(t, path, "p1"), startWorker(t, path, "p2")}
	for _, w := range workers {
		if got := w.line(t); got != "ready" {
			t.Fatalf("worker said %q, want ready", got)
		}
	}
	for _, w := range workers { // start both at once
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	reported := map[string]int{}
	conflicts := 0
	for i, w := range workers {
		var acq, conf int
		got := w.line(t)
		if _, err := fmt.Sscanf(got, "acquired=%d conflicts=%d", &acq, &conf); err != nil {
			t.Fatalf("worker %d summary %q: %v", i, got, err)
		}
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v; stderr:\n%s", i, err, w.stderr.String())
		}
		reported[fmt.Sprintf("p%d", i+1)] = acq
		conflicts += conf
	}

	// Read the whole trail back, in id (commit) order.
	b := open(t, path, nil)
	var recs []audit.Record
	for cursor := ""; ; {
		p, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: "hammer", Cursor: cursor, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, p.Records...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}

	type holder struct {
		owner string
		token int64
	}
	held := map[string]*holder{}
	lastToken := map[string]int64{}
	seenToken := map[int64]bool{}
	acquiredBy := map[string]int{}
	for _, r := range recs {
		h := held[r.Key]
		switch r.Op {
		case protocol.OpAcquire:
			if h != nil {
				t.Fatalf("record %d: %s acquired %s with token %d while %s held it with token %d",
					r.ID, r.Owner, r.Key, r.Token, h.owner, h.token)
			}
			if r.Token <= lastToken[r.Key] {
				t.Fatalf("record %d: token %d for %s after token %d, want strictly increasing", r.ID, r.Token, r.Key, lastToken[r.Key])
			}
			if seenToken[r.Token] {
				t.Fatalf("record %d: token %d issued twice", r.ID, r.Token)
			}
			seenToken[r.Token] = true
			lastToken[r.Key] = r.Token
			held[r.Key] = &holder{r.Owner, r.Token}
			acquiredBy[strings.Split(r.Owner, "/")[0]]++
		case protocol.OpRenew, protocol.OpRelease:
			if h == nil || h.owner != r.Owner || h.token != r.Token {
				t.Fatalf("record %d: %s of %s by %s token %d, but the holder is %+v", r.ID, r.Op, r.Key, r.Owner, r.Token, h)
			}
			if r.Op == protocol.OpRelease {
				held[r.Key] = nil
			}
		default:
			t.Fatalf("record %d: unexpected op %s", r.ID, r.Op)
		}
	}
	for k, h := range held {
		if h != nil {
			t.Errorf("%s still held by %+v after both workers released everything", k, h)
		}
	}
	for p, n := range reported {
		if acquiredBy[p] != n {
			t.Errorf("worker %s reported %d acquisitions, the audit trail has %d", p, n, acquiredBy[p])
		}
		if n == 0 {
			t.Errorf("worker %s never acquired a lease: the processes did not compete", p)
		}
	}
	if conflicts == 0 {
		t.Errorf("no conflicts at all: the processes did not compete for the keys")
	}
	t.Logf("%d audit records, acquisitions %v, %d conflicts", len(recs), reported, conflicts)
}
