package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// tokensWorkerMode makes the test binary a worker (see TestMain) that
// opens workerFileEnv, prints "ready", waits for a line on stdin, then
// acquires and releases tokensKey tokensCycles times as owner
// workerOwnerEnv, printing "token N" for each acquire and "error ..." for
// each failure, then "done".
const (
	tokensWorkerMode = "tokens"
	tokensCycles     = 200
)

var tokensKey = protocol.Key{Namespace: "ns", Name: "shared"}

func runTokensWorker() int {
	ctx := context.Background()
	b, err := sqlite.Open(ctx, os.Getenv(workerFileEnv), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: open: %v\n", err)
		return 1
	}
	defer b.Close(ctx)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "worker: waiting for the start signal: %v\n", err)
		return 1
	}
	cycleTokens(ctx, b, os.Getenv(workerOwnerEnv), func(tok int64) { fmt.Printf("token %d\n", tok) },
		func(err error) { fmt.Printf("error %v\n", strings.ReplaceAll(err.Error(), "\n", " ")) })
	fmt.Println("done")
	return 0
}

// cycleTokens acquires and releases tokensKey tokensCycles times, calling
// got with each token acquired and failed with each error.
func cycleTokens(ctx context.Context, b *sqlite.Backend, owner string, got func(int64), failed func(error)) {
	for i := range tokensCycles {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: tokensKey, Owner: owner, TTL: time.Hour,
			RequestID: fmt.Sprintf("%s-a%d", owner, i)})
		if err != nil && res.Status != protocol.StatusConflict {
			failed(err)
			continue
		}
		if res.Status != protocol.StatusAcquired {
			time.Sleep(time.Millisecond)
			continue
		}
		got(res.Lease.Token)
		if _, err := b.Release(ctx, protocol.ReleaseRequest{Key: tokensKey, Owner: owner, Token: res.Lease.Token,
			RequestID: fmt.Sprintf("%s-r%d", owner, i)}); err != nil {
			failed(err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunningBackendAfterItsShmFileIsRemoved removes the file's -shm (the
// WAL index, which looks like a stale lock file to an operator cleaning
// up) under a Backend that is serving it, then a second OS process opens
// the file, as a `leasectl acquire` or a second service does. The second
// process makes a new index and its own locks; the running Backend keeps
// the removed one. Each then takes the write lock in its own index and
// reads the fencing counter from its own view of the log, so both issue
// the same tokens for one key (and the file ends corrupt), while both
// answer healthy. DESIGN.md: every successful acquire issues a token
// strictly greater than every token ever issued for that key; each
// operation is made harmless or refused at open/health with an error
// naming the fix. The running Backend should notice that its file's
// companions are no longer the ones at their paths and refuse to write.
func TestRunningBackendAfterItsShmFileIsRemoved(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	t.Parallel()
	path := migratedFile(t)
	svc := open(t, path, nil) // the service
	res, err := svc.Acquire(ctxT(t), protocol.AcquireRequest{Key: tokensKey, Owner: "svc", TTL: time.Hour, RequestID: "first"})
	wantStatus(t, "first acquire", res, err, protocol.StatusAcquired)
	rel, err := svc.Release(ctxT(t), protocol.ReleaseRequest{Key: tokensKey, Owner: "svc", Token: res.Lease.Token, RequestID: "first-r"})
	wantStatus(t, "first release", rel, err, protocol.StatusReleased)

	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}

	w := startWorkerMode(t, path, "second", tokensWorkerMode)
	if l := w.line(t); l != "ready" {
		t.Fatalf("worker: %q, want ready; stderr:\n%s", l, w.stderr.String())
	}
	if _, err := fmt.Fprintln(w.stdin, "go"); err != nil {
		t.Fatal(err)
	}

	issued := map[int64]string{res.Lease.Token: "the service"}
	var dup []string
	note := func(who string, tok int64) {
		if first, ok := issued[tok]; ok {
			dup = append(dup, fmt.Sprintf("%d (%s, then %s)", tok, first, who))
			return
		}
		issued[tok] = who
	}
	var svcErrs []string
	cycleTokens(context.Background(), svc, "svc", func(tok int64) { note("the service", tok) },
		func(err error) { svcErrs = append(svcErrs, err.Error()) })
	var workerErrs []string
	for {
		l := w.line(t)
		if l == "done" {
			break
		}
		if tok, ok := strings.CutPrefix(l, "token "); ok {
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil {
				t.Fatalf("worker: %q", l)
			}
			note("the second process", n)
		} else {
			workerErrs = append(workerErrs, l)
		}
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("worker: %v; stderr:\n%s", err, w.stderr.String())
	}
	if len(dup) > 0 {
		t.Fatalf("after the -shm file was removed under the running backend, %d tokens for %s were issued twice, first %s "+
			"(service health %v; service errors %d, second process errors %d)",
			len(dup), tokensKey, dup[0], svc.Health(ctxT(t)), len(svcErrs), len(workerErrs))
	}
}
