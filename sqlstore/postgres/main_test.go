package postgres_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, pgtest.LeakOptions()...)
}
