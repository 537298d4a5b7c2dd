package etcd_test

import (
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
)

// TestMain starts one 3-member cluster (separate processes on loopback)
// for every test of the package; each test works under a prefix of its own.
func TestMain(m *testing.M) { etcdcluster.Main(m) }
