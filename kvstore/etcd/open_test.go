package etcd_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestOpenWaitsForSlowFormatWrite: the dial timeout bounds reaching the
// cluster, not the transaction that records the format version on first
// use (a raft write, slow while a leader is elected or a disk is slow).
// Every Txn of the client is held back past the dial timeout; the cluster
// answers everything else at once. Open used to refuse the store as
// unavailable ("no member answered within dial-timeout").
func TestOpenWaitsForSlowFormatWrite(t *testing.T) {
	t.Parallel()
	const dial, delay = 500 * time.Millisecond, 1500 * time.Millisecond
	var held atomic.Int64
	slowTxn := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" {
			held.Add(1)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := etcdcluster.Shared(t)
	cfg := etcd.WithDialOptions(&etcd.Config{Endpoints: c.Endpoints(), Prefix: c.Prefix(t), DialTimeout: dial}, slowTxn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := etcd.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open of a healthy cluster whose format write takes %v (dial timeout %v): %v", delay, dial, err)
	}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	if held.Load() == 0 {
		t.Fatal("open wrote no format record through the slow Txn")
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatalf("acquire: %v", err)
	}
}

// TestOpenCallerDeadlineDuringProbe: when no member answers within the
// dial timeout, Open probes the endpoints; a caller's deadline that ends
// during the probe wins: Open returns by it, as timeout. The server
// completes TLS handshakes and never says a word (the probe once waited
// 500 ms for a word past the caller's deadline, and reported unavailable).
func TestOpenCallerDeadlineDuringProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	const dial, callerAfter = time.Second, 1250 * time.Millisecond
	cfg := &etcd.Config{Endpoints: []string{srv.URL}, Prefix: "/p", TLS: tlsCfg, DialTimeout: dial}
	took, err := refusedWithin(t, cfg, callerAfter)
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Errorf("open: %v, want timeout (the caller's deadline passed)", err)
	}
	if strings.Contains(err.Error(), "nothing answers there") {
		t.Errorf("open: %v: blames the endpoint for the caller's deadline", err)
	}
	// The caller's deadline is 1.25s; the probe alone used to run to 1.5s.
	if took > callerAfter+500*time.Millisecond {
		t.Errorf("open took %v with a caller's deadline of %v", took, callerAfter)
	}
}

// TestOpenShortDeadlineWithAuth: a healthy cluster with authentication
// and a caller's deadline of a fraction of a second. The client
// authenticates while it connects (a password check on the server takes
// tens of milliseconds); a dial timeout derived as half of such a
// deadline ran out during it and Open refused the healthy cluster as
// unavailable ("no leader or no quorum?"). Open must succeed or give up
// as timeout, never blame the cluster.
func TestOpenShortDeadlineWithAuth(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	host := authCluster(t, "pw")
	cfg, err := etcd.ParseDSN("etcd://root:pw@" + host + "/auth")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := etcd.Open(ctx, cfg); err != nil { // records the format
		t.Fatalf("open with a long deadline: %v", err)
	} else {
		b.Close(context.Background())
	}
	for i := range 6 {
		octx, cancel := context.WithTimeout(ctx, 100*time.Millisecond+time.Duration(i)*20*time.Millisecond)
		b, err := etcd.Open(octx, cfg)
		cancel()
		if err == nil {
			b.Close(context.Background())
			continue
		}
		if !errors.Is(err, protocol.ErrTimeout) {
			t.Errorf("open %d: %v, want success or timeout", i, err)
		}
	}
}

// refusedWithin opens cfg under a deadline callerAfter from now and
// returns how long Open took and its error; the test fails at once when
// Open succeeded.
func refusedWithin(t *testing.T, cfg *etcd.Config, callerAfter time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callerAfter)
	defer cancel()
	start := time.Now()
	b, err := etcd.Open(ctx, cfg)
	took := time.Since(start)
	if err == nil {
		b.Close(context.Background())
		t.Fatalf("open of %v succeeded, want a refusal", cfg.Endpoints)
	}
	t.Log(err)
	return took, err
}

// TestClosedClientUnavailable: a Backend from New on a client its caller
// has since closed answers unavailable, saying the client was closed:
// no deadline passed (timeout would tell the caller to retry, which
// cannot help), and nobody cancelled the operation.
func TestClosedClientUnavailable(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcd.New(t.Context(), cli, &etcd.Config{Prefix: c.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	rt := protocol.New(b, nil)
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for what, err := range map[string]error{
		"acquire": func() error {
			_, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
			return err
		}(),
		"get": func() error { _, err := rt.Get(ctx, protocol.GetRequest{Key: key("k")}); return err }(),
		// Nothing of a batch can be sent: the batch fails as a whole.
		"renew many": func() error {
			_, err := rt.RenewMany(ctx, []protocol.RenewRequest{{Key: key("k"), Owner: "o", Token: 1, TTL: time.Minute}})
			return err
		}(),
		"health": b.Health(ctx),
	} {
		if !errors.Is(err, protocol.ErrUnavailable) || !contains(err, "client was closed") {
			t.Errorf("%s on a closed client: %v, want unavailable saying the client was closed", what, err)
		}
	}
}
