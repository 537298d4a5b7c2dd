package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// The lincheck worker: TestMain runs runLincheckWorker when workerEnv is
// lincheckWorkerMode. It opens workerFileEnv, records its operations as
// JSON lines in lincheckHistoryEnv under the process name lincheckProcEnv,
// prints "ready", and runs the lincheck workload until its stdin closes (or
// lincheckWorkerMax passed), then prints its counts and exits 0.
const (
	lincheckWorkerMode = "lincheck"
	lincheckHistoryEnv = "LEASESTORE_SQLITE_TEST_HISTORY"
	lincheckProcEnv    = "LEASESTORE_SQLITE_TEST_PROC"
	lincheckWorkerMax  = 2 * time.Minute
	// lincheckFullDiskEnv, set in a lincheck worker's environment, makes it
	// fill the disk now and then while it runs: see fillDiskNowAndThen
	// (Linux only: elsewhere no test sets it).
	lincheckFullDiskEnv = "LEASESTORE_SQLITE_TEST_FULL_DISK"
)

func runLincheckWorker() int {
	ctx, stop := context.WithTimeout(context.Background(), lincheckWorkerMax)
	defer stop()
	proc := os.Getenv(lincheckProcEnv)
	f, err := os.OpenFile(os.Getenv(lincheckHistoryEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if os.Getenv(lincheckFullDiskEnv) != "" {
		// The history goes to the parent through a pipe (fd 3): a file of
		// this process would meet the file-size cap that fills the disk.
		f, err = os.NewFile(3, "history"), nil
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", proc, err)
		return 1
	}
	defer f.Close()
	b, err := sqlite.Open(ctx, os.Getenv(workerFileEnv), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: open: %v\n", proc, err)
		return 1
	}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	if os.Getenv(lincheckFullDiskEnv) != "" {
		stopFilling, filled := make(chan struct{}), make(chan struct{})
		go fillDiskNowAndThen(os.Getenv(workerFileEnv), stopFilling, filled)
		defer func() { close(stopFilling); <-filled }() // before Close checkpoints
	}
	go func() { // the parent closes stdin to stop the run
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	fmt.Println("ready")
	clients := 3
	if os.Getenv(lincheckFullDiskEnv) != "" {
		clients = 4 // more writes at once: more batches meet a full disk
	}
	w := lincheck.Workload{Store: rt, Recorder: lincheck.NewRecorder(proc, f), Clients: clients, LoseAnswers: 0.02}
	stats, err := w.Run(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", proc, err)
		return 1
	}
	fmt.Println(stats)
	return 0
}

// lincheckProc is one run of a lincheck worker process.
type lincheckProc struct {
	name    string
	history string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	stderr  strings.Builder
	// copied is closed once the history the worker wrote through its pipe
	// is in the file (full-disk workers; nil for the others).
	copied chan struct{}
}

// startLincheckWorker starts a lincheck worker on db, recording in dir,
// with env (NAME=VALUE) added to its environment.
func startLincheckWorker(t *testing.T, db, dir, name string, env ...string) *lincheckProc {
	t.Helper()
	p := &lincheckProc{name: name, history: filepath.Join(dir, name+".jsonl"), cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(append(os.Environ(), workerEnv+"="+lincheckWorkerMode, workerFileEnv+"="+db,
		lincheckHistoryEnv+"="+p.history, lincheckProcEnv+"="+name), env...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	var pipeR, pipeW *os.File
	if slices.Contains(env, lincheckFullDiskEnv+"=1") {
		// Its history comes through a pipe (fd 3 in the worker) and is
		// copied here into the file: see runLincheckWorker.
		if pipeR, pipeW, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		p.cmd.ExtraFiles = []*os.File{pipeW}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if pipeW != nil {
		_ = pipeW.Close()
		hist, err := os.Create(p.history)
		if err != nil {
			t.Fatal(err)
		}
		p.copied = make(chan struct{})
		go func() {
			defer close(p.copied)
			defer pipeR.Close()
			defer hist.Close()
			_, _ = io.Copy(hist, pipeR) // until the worker exits
		}()
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	if line, err := p.stdout.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		t.Fatalf("worker %s said %q (%v); stderr:\n%s", name, line, err, p.stderr.String())
	}
	return p
}

// countReturns counts the operations that returned in the history files.
func countReturns(t *testing.T, files []string) int {
	t.Helper()
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte(`"ev":"return"`))
	}
	return n
}

// TestLinearizableAcrossKilledProcesses runs the lincheck workload from
// several worker processes on one database file while the test kills one
// of them with SIGKILL, at random moments, and starts a new one in its
// place. The history of every process (the operations a killed process had
// in flight are unknown: they may or may not have committed before it
// died) must be linearizable. The workers also throw away 2% of their
// answers, so that retries meet replays.
func TestLinearizableAcrossKilledProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	const (
		workers   = 3
		wantOps   = 2500
		minKills  = 6
		minRun    = 4 * time.Second
		maxRun    = 90 * time.Second
		killEvery = 500 * time.Millisecond // on average
	)
	db := migratedFile(t)
	dir := t.TempDir()
	var (
		files []string
		lost  = map[string]time.Time{}
		live  [workers]*lincheckProc
		gen   [workers]int
	)
	start := func(i int) {
		name := fmt.Sprintf("w%d.%d", i, gen[i])
		gen[i]++
		live[i] = startLincheckWorker(t, db, dir, name)
		files = append(files, live[i].history)
	}
	for i := range workers {
		start(i)
	}
	began := time.Now()
	kills := 0
	for {
		elapsed := time.Since(began)
		if elapsed > maxRun || elapsed > minRun && kills >= minKills && countReturns(t, files) >= wantOps {
			break
		}
		time.Sleep(killEvery/2 + rand.N(killEvery))
		i := rand.IntN(workers)
		p := live[i]
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait() // killed: the error says so
		if p.cmd.ProcessState.ExitCode() != -1 {
			t.Fatalf("worker %s exited by itself (%v) before it was killed; stderr:\n%s", p.name, p.cmd.ProcessState, p.stderr.String())
		}
		lost[p.name] = time.Now() // it is gone, and nothing it sent can commit any more
		kills++
		start(i)
	}
	for _, p := range live {
		_ = p.stdin.Close()
	}
	for _, p := range live {
		summary, _ := p.stdout.ReadString('\n')
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v; stderr:\n%s", p.name, err, p.stderr.String())
		}
		t.Logf("worker %s: %s", p.name, strings.TrimSpace(summary))
	}

	h, err := lincheck.ReadHistoryFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	for name, at := range lost {
		h.Lost(name, at)
	}
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name()})
	t.Logf("history: %v; %d processes killed, %d started, in %v", res, kills, len(files), time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Each change wrote its record in its own transaction, whatever was
	// killed when, and nothing else wrote one.
	b, err := sqlite.Open(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if err := lincheck.CheckAudit(t.Context(), h, b); err != nil {
		t.Fatal(err)
	}
	if res.Operations < 2000 {
		t.Fatalf("only %d operations in %v: the history is too small to mean much", res.Operations, maxRun)
	}
	if res.Unknown == 0 {
		t.Errorf("no operation of unknown outcome: no kill caught a worker mid-operation")
	}
}

// TestLinearizableWhileSweeping runs the lincheck workload from three
// handles of one database file (each its own pool and runtime) while every
// runtime sweeps the rows of ended leases every few milliseconds with no
// grace: rows vanish under acquires, renews, releases and revokes, and the
// history must still be linearizable.
func TestLinearizableWhileSweeping(t *testing.T) {
	t.Parallel()
	db := migratedFile(t)
	var (
		swept atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		hist  lincheck.History
	)
	observer := protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == protocol.OpSweep {
			swept.Add(int64(ev.Items))
		}
	})
	sweep := &protocol.SweepConfig{Every: 3 * time.Millisecond, Grace: time.Nanosecond}
	for i := range 3 {
		b, err := sqlite.Open(t.Context(), db, nil)
		if err != nil {
			t.Fatal(err)
		}
		rt := protocol.New(b, &protocol.Config{Sweep: sweep, Observer: observer})
		rec := lincheck.NewRecorder(fmt.Sprintf("h%d", i), nil)
		w := &lincheck.Workload{Store: rt, Recorder: rec, Clients: 2, Ops: 700,
			ShortTTL: 10 * time.Millisecond, Keys: []string{"k0", "k1", "k2"}, LoseAnswers: 0.02,
			LockDelay: 10 * time.Millisecond}
		wg.Go(func() {
			defer rt.Close(context.Background())
			stats, err := w.Run(t.Context())
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s: %v", rec.Process(), stats)
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(rec.History())
		})
	}
	wg.Wait()
	res, err := lincheck.Check(&hist, &lincheck.CheckOptions{Name: t.Name(), Sweeping: true, SweepGrace: sweep.Grace})
	t.Logf("history: %v; %d rows swept", res, swept.Load())
	if err != nil {
		t.Fatal(err)
	}
	if res.Operations < 2000 {
		t.Fatalf("only %d operations: the history is too small to mean much", res.Operations)
	}
	// Each change wrote its record, and nothing else did.
	b, err := sqlite.Open(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if err := lincheck.CheckAudit(t.Context(), &hist, b); err != nil {
		t.Fatal(err)
	}
	if swept.Load() == 0 {
		t.Fatal("no row was swept: the run did not test sweeping")
	}
}
