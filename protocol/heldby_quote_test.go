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

// TestLeaseTextsQuoteTheOwner: the texts of an ended lease (a lock-delay
// conflict's, an expiry the store has not yet seen) name its owner as
// the "held by" message does: quoted when it holds a blank or a control
// character.
func TestLeaseTextsQuoteTheOwner(t *testing.T) {
	t.Parallel()
	for _, owner := range []string{"a b", "a\nb"} {
		l := Lease{Key: Key{Namespace: "ns", Name: "k"}, Owner: owner, Token: 7, ExpiresAt: fakeNow, LockDelay: time.Minute}
		want := "the lease of " + strconv.Quote(owner) + " (token 7)"
		for name, text := range map[string]string{
			"LockDelayText":        l.LockDelayText(fakeNow),
			"LockDelayText (late)": l.LockDelayText(fakeNow.Add(time.Hour)),
			"ExpiredText":          l.ExpiredText(),
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s of a lease of owner %q: %q; want it to say %q", name, owner, text, want)
			}
		}
	}
}
