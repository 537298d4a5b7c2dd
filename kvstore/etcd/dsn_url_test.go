package etcd_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
)

// TestParseDSNAcceptsOnlyHostsItCanDial: a DSN naming a running member as
// net.Dial reads its address but not as a URL (a port with a sign:
// 127.0.0.1:+PORT) is refused by ParseDSN or opens; it was accepted, and
// Open spent its dial timeout on an endpoint the etcd client cannot read
// ("http://127.0.0.1:+PORT" is no URL, so the client dials it as written)
// and answered unavailable (leasectl exit 5, not 2). The same holds for a
// zone id not percent-encoded (etcd://[fe80::1%eth0]:2379/p).
func TestParseDSNAcceptsOnlyHostsItCanDial(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	u, err := url.Parse(c.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.Trim(c.Prefix(t), "/")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// As written by etcdctl users, the member opens.
	good, err := etcd.ParseDSN("etcd://" + u.Host + "/" + prefix + "?dial-timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcd.Open(ctx, good)
	if err != nil {
		t.Fatalf("open %q: %v", good.Endpoints, err)
	}
	_ = b.Close(context.Background())

	dsn := "etcd://" + u.Hostname() + ":+" + u.Port() + "/" + prefix + "?dial-timeout=2s"
	cfg, err := etcd.ParseDSN(dsn)
	if err != nil {
		return // refused at once: as it should be
	}
	b, err = etcd.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("ParseDSN(%q) accepted the endpoints %q, which Open cannot dial: %v", dsn, cfg.Endpoints, err)
	}
	_ = b.Close(context.Background())

	if cfg, err := etcd.ParseDSN("etcd://[fe80::1%eth0]:2379/p"); err == nil {
		if _, perr := url.Parse(cfg.Endpoints[0]); perr != nil {
			t.Errorf("ParseDSN accepted the endpoint %q, which the etcd client cannot read: %v", cfg.Endpoints[0], perr)
		}
	}
}
