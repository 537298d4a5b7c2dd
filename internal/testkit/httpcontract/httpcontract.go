// Package httpcontract runs a backend's contract suite over HTTP: it serves
// two handles on one store, each through a protocol.Runtime and an
// httpapi.Handler on a real loopback port, and gives the suite two
// httpapi.Clients, so every case goes client → HTTP → server → store.
// Backends' tests call [Harness] from their contract factory, where their
// test-only clock option is at hand.
//
// Like contract, it must not import any database driver or any package
// under sqlstore/.
package httpcontract

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// Harness serves first and second (two handles on one fresh store; the
// harness owns them and closes them when the test ends) and returns the
// suite's harness of HTTP clients. reader reads the store's trail (first,
// usually).
//
// The HTTP API has no route for sweeping or pruning, which are the
// server's own business (its runtime sweeps; leasectl prunes): when the
// store can, the harness's first handle sweeps and its reader prunes the
// served store directly, and the suite checks what clients see over HTTP
// afterwards. The servers have the namespace defaults of the lock-delay
// of [contract.HandleLockDelays], as two servers with different
// `serve --lock-delay` on one store.
func Harness(t *testing.T, first, second protocol.Backend, reader audit.Reader) contract.Harness {
	t.Helper()
	d1, d2 := contract.HandleLockDelays()
	c1 := serve(t, first, reader, d1)
	c2 := serve(t, second, nil, d2)
	h := contract.Harness{Backend: c1, Second: c2, Audit: c1, ServesLockDelays: true}
	if s, ok := first.(protocol.Sweeper); ok {
		h.Backend = sweepingClient{Client: c1, sweeper: s}
	}
	if p, ok := reader.(audit.Pruner); ok {
		h.Audit = pruningFollower{pruningReader{Reader: c1, pruner: p}, c1}
	}
	return h
}

// Serve runs b (owned: closed when the test ends) behind a handler on a
// loopback port until the test ends, with reader (nil for none) serving
// the trail, and returns a client of it.
func Serve(t testing.TB, b protocol.Backend, reader audit.Reader) *httpapi.Client {
	t.Helper()
	return serve(t, b, reader, nil)
}

// serve is [Serve] with the served runtime's namespace defaults of the
// lock-delay.
func serve(t testing.TB, b protocol.Backend, reader audit.Reader, delays []protocol.NamespaceLockDelay) *httpapi.Client {
	t.Helper()
	// The suite's manual clock moves by hours: a background sweep would
	// remove rows the cases still look at.
	rt := protocol.New(b, &protocol.Config{DefaultTimeout: 30 * time.Second, Sweep: &protocol.SweepConfig{Every: -1}, LockDelays: delays})
	if reader != nil {
		reader = audit.RuntimeReader(rt) // as leasectl serve reads it
	}
	h, err := httpapi.NewHandler(rt, reader, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.CloseStreams() // as leasectl serve does at shutdown
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close the served store: %v", err)
		}
	})
	c, err := httpapi.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// sweepingClient is the first client, sweeping the served store directly.
type sweepingClient struct {
	*httpapi.Client
	sweeper protocol.Sweeper
}

func (s sweepingClient) Sweep(ctx context.Context, max int, grace time.Duration) (protocol.SweepResult, error) {
	return s.sweeper.Sweep(ctx, max, grace)
}

// pruningReader reads the trail over HTTP and prunes the served store directly.
type pruningReader struct {
	audit.Reader
	pruner audit.Pruner
}

func (p pruningReader) PruneAudit(ctx context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	return p.pruner.PruneAudit(ctx, r)
}

// pruningFollower is a pruningReader that streams the trail as its client
// does, so that audit.Watch over it follows through GET /v1/audit/follow,
// as leasectl watch and audit --follow over an http DSN do, rather than
// poll GET /v1/audit.
type pruningFollower struct {
	pruningReader
	audit.PositionFollower
}

// Woken checks that a blocking acquire over HTTP is woken by the
// notification stream: a waiter through a client of first, with Recheck
// at 30s, must take the key within 2s after the holder released it
// through a client of second (a server of its own, as another process's
// would be). Without the stream the waiter would sleep until Recheck.
// first and second are two handles on one fresh store with real clocks;
// Woken owns them.
func Woken(t *testing.T, first, second protocol.Backend) {
	t.Helper()
	waiter := protocol.New(Serve(t, first, nil), nil)
	holder := protocol.New(Serve(t, second, nil), nil)
	for _, rt := range []*protocol.Runtime{waiter, holder} {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k := protocol.Key{Namespace: "ns", Name: "woken"}
	held, err := holder.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatalf("acquire by the holder: %v", err)
	}
	asleep := make(chan struct{}, 1)
	type outcome struct {
		res protocol.Result
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := waiter.AcquireWait(ctx, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute},
			&protocol.WaitConfig{Recheck: 30 * time.Second, Waiting: func(protocol.Lease) {
				select {
				case asleep <- struct{}{}:
				default:
				}
			}})
		done <- outcome{res, err, time.Now()}
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-asleep:
	case o := <-done:
		done <- o
		t.Fatalf("the waiter returned %q (%v) while the holder held the key", o.res.Status, o.err)
	}
	if _, err := holder.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "holder", Token: held.Lease.Token}); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	released := time.Now()
	select {
	case o := <-done:
		done <- o
		if o.err != nil || o.res.Status != protocol.StatusAcquired || o.res.Lease.Owner != "waiter" {
			t.Fatalf("the waiter's acquire: %q %v, want the waiter's lease", o.res.Status, o.err)
		}
		t.Logf("the waiter took the key %v after the release returned", o.at.Sub(released))
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not woken within 2s of the release: a waiter over HTTP sleeps until its Recheck (30s) unless the server's notification stream wakes it")
	}
}
