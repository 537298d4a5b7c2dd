//go:build linux

package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// fullDiskWorkerMode makes the test binary a process whose file-size limit
// (RLIMIT_FSIZE, process-wide, hence a process of its own) is capped at the
// write-ahead log's size while batches of writes run, so their commit
// fails as on a full disk. See runFullDiskWorker.
const fullDiskWorkerMode = "fulldisk"

// fullDiskAnswer is one answer the full-disk worker got, as it prints it.
type fullDiskAnswer struct {
	Round    string          `json:"round"` // "owners", "retries" (the failed batches) or "after"
	Owner    string          `json:"owner"`
	Status   protocol.Status `json:"status"`
	Replayed bool            `json:"replayed"`
	Holder   string          `json:"holder"` // the result's lease's owner
	Token    int64           `json:"token"`  // the result's lease's token
	Err      string          `json:"err"`
}

// runFullDiskWorker opens workerFileEnv, writes once (so the write-ahead
// log has frames), caps the process's file size at the log's size and runs
// two batches of 8 coalesced acquires of one key each: 8 owners with their
// own request ids, then one owner's request retried 8 times at once with
// one request id (as httpapi.Client retries on transport errors). It then
// lifts the cap, has owner "later" acquire both keys, and prints every
// answer as a JSON line.
func runFullDiskWorker() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "fulldisk worker: "+format+"\n", args...)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := os.Getenv(workerFileEnv)
	b, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return fail("open: %v", err)
	}
	defer b.Close(context.Background())
	if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("warm"), Owner: "w", TTL: time.Minute, RequestID: "warm"}); err != nil {
		return fail("warm-up write: %v", err)
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		return fail("%v", err)
	}
	// Writing past the limit raises SIGXFSZ; ignored, the write fails with
	// EFBIG, as a full disk fails it with ENOSPC.
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return fail("getrlimit: %v", err)
	}
	capped := lim
	capped.Cur = uint64(wal.Size())
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &capped); err != nil {
		return fail("setrlimit: %v", err)
	}
	var answers []fullDiskAnswer
	var mu sync.Mutex
	batch := func(round string, req func(i int) protocol.AcquireRequest) error {
		release := sqlite.HoldWriter(b)
		defer release()
		before := sqlite.WriteBatches(b)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				r := req(i)
				res, err := b.Acquire(ctx, r)
				a := fullDiskAnswer{Round: round, Owner: r.Owner, Status: res.Status, Replayed: res.Replayed}
				if err != nil {
					a.Err = err.Error()
					var pe *protocol.Error
					if errors.As(err, &pe) {
						a.Status = pe.Status
					}
				}
				if res.Lease != nil {
					a.Holder, a.Token = res.Lease.Owner, res.Lease.Token
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
		for sqlite.WriteQueueLen(b) != 8 {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: the 8 acquires did not queue", round)
			}
			time.Sleep(time.Millisecond)
		}
		release()
		wg.Wait()
		if n := sqlite.WriteBatches(b) - before; n != 1 {
			return fmt.Errorf("%s: %d batches, want 1", round, n)
		}
		return nil
	}
	if err := batch("owners", func(i int) protocol.AcquireRequest {
		return protocol.AcquireRequest{Key: key("k"), Owner: fmt.Sprintf("o%d", i), TTL: time.Minute, RequestID: fmt.Sprintf("r%d", i)}
	}); err != nil {
		return fail("%v", err)
	}
	if err := batch("retries", func(int) protocol.AcquireRequest {
		return protocol.AcquireRequest{Key: key("r"), Owner: "retrier", TTL: time.Minute, RequestID: "same"}
	}); err != nil {
		return fail("%v", err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return fail("setrlimit: %v", err)
	}
	for _, k := range []string{"k", "r"} {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(k), Owner: "later", TTL: time.Minute, RequestID: "later-" + k})
		a := fullDiskAnswer{Round: "after", Owner: "later", Status: res.Status}
		if err != nil {
			a.Err = err.Error()
		}
		if res.Lease != nil {
			a.Holder, a.Token = res.Lease.Owner, res.Lease.Token
		}
		answers = append(answers, a)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, a := range answers {
		if err := enc.Encode(a); err != nil {
			return fail("%v", err)
		}
	}
	return 0
}

// workerOutput runs this test binary as a worker process in mode on the
// store at path and returns its standard output; its failure fails t.
func workerOutput(t *testing.T, mode, path string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+mode, workerFileEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("worker: %v; stderr:\n%s", err, stderr.String())
	}
	return out
}

// A batch whose commit fails (the disk is full) answers unavailable or
// timeout to every member: none keeps an answer judged against the batch's
// rolled-back writes (a conflict naming a holder that never was, a replay
// of an acquire that never committed), and no token a member was told it
// holds is issued again to another owner once the disk has room.
func TestFullDiskBatchFailsEveryMember(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	out := workerOutput(t, fullDiskWorkerMode, path)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	held := map[int64]string{} // token -> owner, as told to callers
	n := 0
	for dec.More() {
		var a fullDiskAnswer
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", a)
		switch a.Round {
		case "owners", "retries":
			n++
			if a.Status != protocol.StatusUnavailable && a.Status != protocol.StatusTimeout {
				t.Errorf("%s: %s answered %q (replayed %v, lease of %q token %d, err %q) from a batch that did not commit; want unavailable or timeout",
					a.Round, a.Owner, a.Status, a.Replayed, a.Holder, a.Token, a.Err)
			}
			if a.Status == protocol.StatusAcquired {
				held[a.Token] = a.Owner
			}
		case "after":
			if a.Status != protocol.StatusAcquired {
				t.Fatalf("after the disk has room: %+v, want acquired", a)
			}
			if o, ok := held[a.Token]; ok {
				t.Errorf("token %d issued to %s, and before to %s by a batch that did not commit", a.Token, a.Owner, o)
			}
		}
	}
	if n != 16 {
		t.Fatalf("%d answers from the two batches, want 16", n)
	}
}

// fillDiskNowAndThen caps the process's file size at the write-ahead log's
// size for 10 to 40 ms at a time, with as long between, until stop is
// closed, and lifts the cap when it returns (as done closes). Commits that
// need the log to grow meanwhile fail as on a full disk.
func fillDiskNowAndThen(file string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim) }()
	pause := func() bool {
		select {
		case <-stop:
			return false
		case <-time.After(time.Duration(10+rand.IntN(30)) * time.Millisecond):
			return true
		}
	}
	for pause() {
		wal, err := os.Stat(file + "-wal")
		if err != nil {
			continue
		}
		capped := lim
		capped.Cur = uint64(wal.Size())
		_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &capped)
		ok := pause()
		_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim)
		if !ok {
			return
		}
	}
}

// The lincheck workload from two worker processes on one file, each with
// four clients (so their writes coalesce), while each process's disk fills
// up now and then: commits fail, batches and all, and every history must
// still be linearizable (an answer from a batch that did not commit would
// not be: a replayed acquire whose token went to another owner later).
func TestLinearizableWithFullDisk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	db := migratedFile(t)
	dir := t.TempDir()
	var files []string
	var procs []*lincheckProc
	for i := range 2 {
		p := startLincheckWorker(t, db, dir, fmt.Sprintf("w%d", i), lincheckFullDiskEnv+"=1")
		procs = append(procs, p)
		files = append(files, p.history)
	}
	began := time.Now()
	for time.Since(began) < 3*time.Second || countReturns(t, files) < 1500 && time.Since(began) < time.Minute {
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range procs {
		_ = p.stdin.Close()
	}
	var failures int
	for _, p := range procs {
		summary, _ := p.stdout.ReadString('\n')
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v; stderr:\n%s", p.name, err, p.stderr.String())
		}
		<-p.copied
		t.Logf("worker %s: %s", p.name, strings.TrimSpace(summary))
	}
	h, err := lincheck.ReadHistoryFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
	t.Logf("history: %v in %v", res, time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		failures += strings.Count(string(b), `"unavailable"`)
	}
	if failures == 0 {
		t.Fatal("no operation answered unavailable: the disk never filled up under a commit")
	}
}
