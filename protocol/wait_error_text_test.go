package protocol_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Error's rule (protocol.Error, STYLE.md): the message "names neither the
// key (Key does) nor the cause", so that the text puts each once. The
// error of a wait that gave up is an *Error with the key; its message must
// not name the key again.
func TestAcquireWaitGivingUpNamesTheKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := protocol.Key{Namespace: "wait", Name: "job-77"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "holder", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := protocol.AcquireWait(waitCtx, rt, protocol.AcquireRequest{Key: k, Owner: "waiter", TTL: time.Minute}, nil)
	if err == nil {
		t.Fatal("the wait took a held key")
	}
	if n := strings.Count(err.Error(), k.String()); n != 1 {
		t.Fatalf("the error of a wait that gave up names the key %d times, want once: %q", n, err.Error())
	}
}
