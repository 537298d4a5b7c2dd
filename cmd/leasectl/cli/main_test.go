package cli

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	if aliveProbe() || pausedRead() || cliWorker() {
		return
	}
	goleak.VerifyTestMain(m, pgtest.LeakOptions()...)
}
