package postgres_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestEveryCallAfterCloseOnABorrowedPoolAnswersClosed: once Close began,
// every call of a Backend made by New answers closed, as one made by Open
// does (the contract case Lifecycle/closed_backend_answers_closed, whose
// handles come from Open), although Close leaves the pool given to New
// open: the calls went on being served through it.
func TestEveryCallAfterCloseOnABorrowedPoolAnswersClosed(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b, err := postgres.New(ctx, rawPool(t, pgtest.MigratedDSN(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	contract.AcquireCloseExpectClosed(t, b, key("held").Namespace)
	_ = b.Close(context.Background())
}
