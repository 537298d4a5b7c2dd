package etcd_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestNewRefusesWhatOnlyOpenApplies: New borrows the caller's client, so
// the Config fields that only Open can apply (the endpoints, the user and
// password, TLS, the dial timeout) cannot take effect. As postgres.New
// does with its Open-only fields (CONTRIBUTING: New "refusing Config
// fields that only Open can apply"), New must refuse them as invalid
// rather than ignore them: a caller who passes a user and password
// believes the store authenticates as that user, while every operation
// runs as the client's (here: no user at all).
func TestNewRefusesWhatOnlyOpenApplies(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	for name, cfg := range map[string]*etcd.Config{
		"user and password": {Prefix: c.Prefix(t) + "/up", Username: "reader", Password: "readerpw"},
		"endpoints":         {Prefix: c.Prefix(t) + "/ep", Endpoints: []string{"http://192.0.2.1:2379"}},
		"dial timeout":      {Prefix: c.Prefix(t) + "/dt", DialTimeout: time.Second},
	} {
		b, err := etcd.New(t.Context(), cli, cfg)
		if b != nil {
			_ = b.Close(t.Context())
		}
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("New with %s set (which only Open applies): %v; want invalid, naming the field, rather than the field ignored", name, err)
		}
	}
}
