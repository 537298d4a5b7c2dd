package protocol

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHeldByMessageQuotesTheOwner: the message of a conflict ("held by
// OWNER with token N until T"), and of a wait that gave up on one, named
// an owner holding a blank or a control character as it is, so that
// "held by a b with token 7" could be the owner "a" or "a b", and an owner
// holding a newline broke the message over two lines. It must show the
// owner as leasectl's list and get do (quoted as Go quotes a string).
func TestHeldByMessageQuotesTheOwner(t *testing.T) {
	t.Parallel()
	k := Key{Namespace: "ns", Name: "k"}
	for _, owner := range []string{"a b", "a\nb"} {
		b := &fakeBackend{handle: func(ctx context.Context, op Op, req any) (Result, error) {
			l := fakeLease(k, owner, 7)
			l.ExpiresAt = time.Now().Add(time.Hour)
			return Result{Status: StatusConflict, Lease: l}, nil
		}}
		rt := New(b, nil)
		want := "held by " + strconv.Quote(owner) + " with token 7 until "
		req := AcquireRequest{Key: k, Owner: "me", TTL: time.Minute}
		res, err := rt.Acquire(t.Context(), req)
		if !strings.Contains(res.Message, want) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("conflict with owner %q: message %q, error %v; want them to say %q", owner, res.Message, err, want)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		res, err = AcquireWait(ctx, rt, req, nil)
		cancel()
		if !strings.Contains(res.Message, want) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a wait given up on owner %q: message %q, error %v; want them to say %q", owner, res.Message, err, want)
		}
		_ = rt.Close(t.Context())
	}
}
