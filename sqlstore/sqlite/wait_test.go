package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/internal/testkit/wakebench"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// releaseWorkerMode makes the test binary a process that releases one
// lease (the key "k" of namespace "ns", workerOwnerEnv, releaseTokenEnv)
// in the file workerFileEnv and exits: 0 when it answered released.
const (
	releaseWorkerMode = "release"
	releaseTokenEnv   = "LEASESTORE_SQLITE_TEST_TOKEN"
)

func runReleaseWorker() int {
	ctx := context.Background()
	b, err := sqlite.Open(ctx, os.Getenv(workerFileEnv), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "release worker: open: %v\n", err)
		return 1
	}
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	token, _ := strconv.ParseInt(os.Getenv(releaseTokenEnv), 10, 64)
	_, err = rt.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: os.Getenv(workerOwnerEnv), Token: token})
	if err != nil {
		fmt.Fprintf(os.Stderr, "release worker: %v\n", err)
		return 1
	}
	return 0
}

// TestWaitWokenByAnotherProcess: a waiter in this process is woken by a
// release that another OS process commits, through the data_version
// check: its re-check interval is an hour and the holder's lease ten
// minutes, so nothing else could wake it within the test's deadline.
func TestWaitWokenByAnotherProcess(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b, err := sqlite.Open(ctxT(t), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	held, err := rt.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "holder", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan protocol.Lease, 16)
	done := make(chan error, 1)
	var got protocol.Result
	wctx := ctxT(t)
	go func() {
		var err error
		got, err = rt.AcquireWait(wctx, protocol.AcquireRequest{Key: key("k"), Owner: "waiter", TTL: time.Minute},
			&protocol.WaitConfig{Recheck: time.Hour, Waiting: func(l protocol.Lease) { waiting <- l }})
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the waiter returned before the release: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+releaseWorkerMode, workerFileEnv+"="+path,
		workerOwnerEnv+"=holder", releaseTokenEnv+"="+strconv.FormatInt(held.Lease.Token, 10))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the releasing process failed: %v\n%s", err, out)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	if got.Lease.Owner != "waiter" || got.Lease.Token <= held.Lease.Token {
		t.Fatalf("the waiter took %+v, want a lease of its own after token %d", got.Lease, held.Lease.Token)
	}
}

// BenchmarkWakeUp measures how soon a waiter takes a key after its holder
// released it: wake-p50-ms and wake-p99-ms, from the release's return to
// the waiter's acquire returning. "same_backend": the release goes through
// the waiter's Backend (in-process signal); "other_backend": through a
// second Backend on the file, as another process would (found by the
// data_version check). acquire-p50-ms is a plain acquire of a free key in
// the same run, the floor any hand-over pays.
func BenchmarkWakeUp(b *testing.B) {
	for _, mode := range []string{"same_backend", "other_backend"} {
		b.Run(mode, func(b *testing.B) {
			path := migratedFile(b)
			open := func() *protocol.Runtime {
				be, err := sqlite.Open(context.Background(), path, nil)
				if err != nil {
					b.Fatal(err)
				}
				rt := protocol.New(be, nil)
				b.Cleanup(func() { _ = rt.Close(context.Background()) })
				return rt
			}
			waiterRT := open()
			holderRT := waiterRT
			if mode == "other_backend" {
				holderRT = open()
			}
			wakebench.Run(b, waiterRT, holderRT)
		})
	}
}

// BenchmarkWakeUpOverHTTP is BenchmarkWakeUp's other_backend through the
// HTTP API: the waiter and the holder each talk to a server of their own
// (on a loopback port) serving its own Backend on the file, so a release
// goes client → server → file, is found by the waiter's server's
// data_version check, reaches the waiter's client as an event of its
// notification stream, and the waiter's acquire goes client → server.
func BenchmarkWakeUpOverHTTP(b *testing.B) {
	path := migratedFile(b)
	serve := func() *protocol.Runtime {
		be, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			b.Fatal(err)
		}
		rt := protocol.New(httpcontract.Serve(b, be, nil), nil)
		b.Cleanup(func() { _ = rt.Close(context.Background()) })
		return rt
	}
	wakebench.Run(b, serve(), serve())
}

// TestOneSignalPerRelease: a release through the Backend signals its
// waiters once: at once, in-process, and not a second time when the poller
// finds the release in the trail (a notification stream sent two signal
// events for one release).
func TestOneSignalPerRelease(t *testing.T) {
	t.Parallel()
	b, err := sqlite.Open(ctxT(t), migratedFile(t), &sqlite.Config{NotifyInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	k := protocol.Key{Namespace: "ns", Name: "k"}
	ch, cancel, err := b.Subscribe(ctxT(t), k)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for i := range 3 {
		acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute, RequestID: fmt.Sprintf("a%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "w", Token: acq.Lease.Token, RequestID: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("release %d: no signal", i)
		}
		select {
		case <-ch:
			t.Fatalf("release %d: a second signal within 250ms (the poller signalled the Backend's own release again)", i)
		case <-time.After(250 * time.Millisecond): // five of the poller's intervals
		}
	}
}

// TestHoldHearsARevokeAfterAFailedPollerRead: a failed read of the
// cross-process poller (here the audit trail briefly renamed away; in the
// field any error of its data_version or audit queries) signals every
// waiter and the poller goes on, on a new connection once a baseline read
// succeeds, so a holder subscribed before the failure still hears at once
// a revoke made through another Backend on the file afterwards. The failed
// read used to end the poller (a new one started only at the next
// Subscribe): the holder heard of the revoke at its next renewal, 20s
// later.
func TestHoldHearsARevokeAfterAFailedPollerRead(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	holder := protocol.New(open(t, path, nil), nil)
	other := protocol.New(open(t, path, nil), nil)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spy := getspy.New(holder)
	k := key("k")
	h, err := protocol.Hold(ctxT(t), spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the read once the subscription is live
	case <-spy.Gets:
	case <-time.After(5 * time.Second):
		t.Fatal("no read after the subscription")
	}
	if _, err := db.Exec(`ALTER TABLE leasestore_audit RENAME TO leasestore_audit_away`); err != nil {
		t.Fatal(err)
	}
	select { // the failed read signalled every waiter: the holder reads the key, still held
	case <-spy.Gets:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller's failed read signalled nobody")
	}
	if _, err := db.Exec(`ALTER TABLE leasestore_audit_away RENAME TO leasestore_audit`); err != nil {
		t.Fatal(err)
	}
	if h.Context().Err() != nil {
		t.Fatalf("lost before the revoke: %v", context.Cause(h.Context()))
	}
	revoked := time.Now()
	if _, err := other.Revoke(ctxT(t), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
		if !errors.Is(context.Cause(h.Context()), protocol.ErrNotFound) {
			t.Fatalf("the holder lost the lease with %v, want a cause matching ErrNotFound", context.Cause(h.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("revoke through another Backend %v ago, after a failed poller read: the holder has not heard of it (renewals every 20s)",
			time.Since(revoked).Round(time.Millisecond))
	}
}

// BenchmarkLossHeard measures how soon a holder (protocol.Hold) hears that
// another Backend on the file revoked its lease: loss-p50-ms and
// loss-p99-ms, from the revoke's return to the Held's context ending, with
// the holder renewing every 20 s (so only the store's signal tells it);
// directly and over the HTTP API (each side with a server of its own); a
// Hold (hold) and a scheduler handler (scheduler).
func BenchmarkLossHeard(b *testing.B) {
	for _, mode := range []string{"other_backend", "over_http"} {
		b.Run(mode, func(b *testing.B) {
			path := migratedFile(b)
			open := func() *protocol.Runtime {
				be, err := sqlite.Open(context.Background(), path, nil)
				if err != nil {
					b.Fatal(err)
				}
				var rt *protocol.Runtime
				if mode == "over_http" {
					rt = protocol.New(httpcontract.Serve(b, be, nil), nil)
				} else {
					rt = protocol.New(be, nil)
				}
				b.Cleanup(func() { _ = rt.Close(context.Background()) })
				return rt
			}
			holder, revoker := open(), open()
			b.Run("hold", func(b *testing.B) { wakebench.RunLoss(b, holder, revoker) })
			b.Run("scheduler", func(b *testing.B) { wakebench.RunSchedulerLoss(b, holder, revoker) })
		})
	}
}
