package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
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
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "w", TTL: time.Minute, RequestID: "r0"})
	if err != nil || held.Status != protocol.StatusAcquired {
		t.Fatalf("acquire before Close: %v %v", held.Status, err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	contract.ExpectClosed(t, b, *held.Lease)
	_ = b.Close(context.Background())
}
