package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestEveryCallAfterCloseOnABorrowedDBAnswersClosed: once Close began,
// every call of a Backend made by New answers closed, as one made by Open
// does (the contract case Lifecycle/closed_backend_answers_closed, whose
// handles come from Open), although Close leaves the *sql.DB given to New
// open.
func TestEveryCallAfterCloseOnABorrowedDBAnswersClosed(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b, err := sqlite.New(ctx, rawDB(t, migratedFile(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	contract.AcquireCloseExpectClosed(t, b, key("held").Namespace)
	_ = b.Close(context.Background())
}

// TestHolderHearsTheBackendClose: a Backend closed under a holder (here
// under the Runtime it holds through, which is not closed itself, so only
// the Backend's signal tells) signals its subscribers as it closes, and
// the holder's get answers closed: the lease can be neither confirmed nor
// renewed, and the holder hears the end at once, with a cause matching
// ErrLeaseLost and ErrClosed, not at its next renewal, 20s later.
func TestHolderHearsTheBackendClose(t *testing.T) {
	t.Parallel()
	b := open(t, migratedFile(t), nil)
	spy := getspy.New(protocol.New(b, nil))
	h, err := protocol.Hold(ctxT(t), spy, protocol.AcquireRequest{Key: key("k"), Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the read once the subscription is live
	case <-spy.Gets:
	case <-time.After(5 * time.Second):
		t.Fatal("no read after the subscription")
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second
	select {
	case <-h.Context().Done():
	case <-time.After(bound):
		t.Fatalf("the Backend was closed under the holder: it has not heard of it within %v (renewals every 20s)", bound)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrClosed) {
		t.Fatalf("cause %v, want one matching ErrLeaseLost and ErrClosed", cause)
	}
}
