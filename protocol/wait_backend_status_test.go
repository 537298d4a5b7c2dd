package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// AcquireWait answers as a Runtime does whatever Store it is given: a
// result whose status is the error's. A backend used directly answers a
// failure (here closed) with an error and an empty Result; the wait's
// result must still say closed, not an empty status outside the
// vocabulary.
func TestAcquireWaitOverABackendAnswersTheStatusInItsResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := memstore.New(nil)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := protocol.AcquireWait(ctx, b, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute}, nil)
	if !errors.Is(err, protocol.ErrClosed) || res.Status != protocol.StatusClosed {
		t.Errorf("AcquireWait over a closed bare backend: result status %q, error %v; want closed in both", res.Status, err)
	}
}
