package protocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestAcquireWaitRefusesNegativeRecheck: AcquireWait refuses a negative
// WaitConfig.Recheck as Hold does (invalid, nothing acquired, an error
// naming the field and the fix), instead of taking it as the default.
func TestAcquireWaitRefusesNegativeRecheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	key := protocol.Key{Namespace: "ns", Name: "wait-recheck"}
	res, err := protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute},
		&protocol.WaitConfig{Recheck: -time.Second})
	if !errors.Is(err, protocol.ErrInvalid) || res.Status != protocol.StatusInvalid {
		t.Fatalf("AcquireWait with Recheck -1s: status %q, err %v; want invalid", res.Status, err)
	}
	for _, want := range []string{"recheck", "-1s", "is negative", "zero for the default"} {
		if !strings.Contains(err.Error(), want) || !strings.Contains(res.Message, want) {
			t.Errorf("AcquireWait with Recheck -1s: err %q, message %q; want both to say %q", err, res.Message, want)
		}
	}
	if res, err := rt.Get(ctx, protocol.GetRequest{Key: key}); err == nil {
		t.Errorf("AcquireWait with Recheck -1s acquired the key (token %d); want nothing acquired", res.Lease.Token)
	}
}
