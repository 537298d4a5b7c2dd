package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// serveHTTP serves b through a runtime and an httpapi handler on a
// loopback port until the test ends, logging into log (nil: nowhere).
func serveHTTP(t *testing.T, b protocol.Backend, reader bool, log io.Writer) string {
	t.Helper()
	rt := protocol.New(b, &protocol.Config{Sweep: &protocol.SweepConfig{Every: -1}})
	var r audit.Reader
	if reader {
		r = audit.RuntimeReader(rt)
	}
	if log == nil {
		log = io.Discard
	}
	h, err := httpapi.NewHandler(rt, r, &httpapi.Config{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.CloseStreams()
		srv.Close()
		_ = rt.Close(context.Background())
	})
	return srv.URL
}

// TestWaitLocksBoundedOverHTTP: 1,100 notification streams, each on a key
// of its own, wait at once through one served store, and the store's
// listener holds at most 1,024 advisory locks for them (the keys' buckets),
// not one per key: a reader opening streams cannot fill the cluster's lock
// table. A release still wakes the stream of its key.
func TestWaitLocksBoundedOverHTTP(t *testing.T) {
	t.Parallel()
	const streams = 1100
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	url := serveHTTP(t, openBackend(t, dsn, &postgres.Config{ApplicationName: app}), false, nil)
	holder := openBackend(t, dsn, nil)
	c, err := httpapi.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	chans := make([]<-chan struct{}, streams)
	for i := range streams {
		ch, cancel, err := c.Subscribe(ctxT(t), key(fmt.Sprintf("wait-%d", i)))
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		t.Cleanup(cancel)
		chans[i] = ch
	}
	raw := rawPool(t, dsn)
	locks := count(t, raw, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = $1 AND l.locktype = 'advisory'`, app)
	t.Logf("%d streams on distinct keys: the served store's sessions hold %d advisory locks", streams, locks)
	if locks == 0 || locks > 1024 {
		t.Fatalf("%d streams waiting hold %d advisory locks, want 1 to 1,024", streams, locks)
	}
	for _, i := range []int{0, streams - 1} {
		k := key(fmt.Sprintf("wait-%d", i))
		acq, err := holder.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "h", TTL: time.Minute, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
		res, err := holder.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "h", Token: acq.Lease.Token, RequestID: fmt.Sprintf("r%d", i)})
		wantStatus(t, "release", res, err, protocol.StatusReleased)
		select {
		case <-chans[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("the release of %s did not signal its stream", k)
		}
	}
}

// TestHTTPErrorsNameNoConnectionDetails: with the database out of reach,
// every route answers without the database's user, name or address in its
// body (the server's log has them), unauthenticated probes included.
func TestHTTPErrorsNameNoConnectionDetails(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b, link, pcfg := behindPartition(t, dsn, nil)
	log := &syncbuf.Buffer{}
	url := serveHTTP(t, b, true, log)
	link.cut()
	secrets := []string{"user=", "database=", pcfg.ConnConfig.User, pcfg.ConnConfig.Database,
		fmt.Sprintf("%s:%d", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port), "partition:", "dial"}
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`},
		{"POST", "/v1/renew", `{"namespace":"ns","key":"k","owner":"o","token":1,"ttl":"30s"}`},
		{"POST", "/v1/release", `{"namespace":"ns","key":"k","owner":"o","token":1}`},
		{"POST", "/v1/revoke", `{"namespace":"ns","key":"k","actor":"a","reason":"r"}`},
		{"GET", "/v1/leases/ns/k", ""},
		{"GET", "/v1/leases/ns", ""},
		{"GET", "/v1/audit?namespace=ns", ""},
		{"GET", "/v1/notify/ns/k", ""},
		{"GET", "/readyz", ""},
		{"GET", "/healthz", ""},
	}
	for _, r := range routes {
		req, err := http.NewRequest(r.method, url+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(httpapi.HeaderTimeout, "2s")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if r.path != "/healthz" && resp.StatusCode != 503 && resp.StatusCode != 504 {
			t.Errorf("%s %s with the database out of reach: HTTP %d %s", r.method, r.path, resp.StatusCode, body)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(string(body), s) {
				t.Errorf("%s %s: the body names %q: %s", r.method, r.path, s, body)
			}
		}
	}
	if !strings.Contains(log.String(), "user=") {
		t.Errorf("the server's log does not have the cause:\n%s", log.String())
	}
}
