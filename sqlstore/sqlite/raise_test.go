package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// cycleKey acquires name as owner, and releases it unless keep; it returns
// the token.
func cycleKey(t *testing.T, b *sqlite.Backend, name, owner, rid string, keep bool) int64 {
	t.Helper()
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: owner, TTL: time.Hour, RequestID: rid + "-a"})
	wantStatus(t, "acquire "+name, res, err, protocol.StatusAcquired)
	if !keep {
		rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key(name), Owner: owner, Token: res.Lease.Token, RequestID: rid + "-r"})
		wantStatus(t, "release "+name, rel, err, protocol.StatusReleased)
	}
	return res.Lease.Token
}

// TestRaiseTokensAfterTheFileIsPutBack puts back a copy of the file taken
// before more leases were issued, as an operator restoring a backup does:
// the file issues a token again that a holder of before still has (the
// hazard). After RaiseTokens every token is greater than any issued
// before the copy was put back.
func TestRaiseTokensAfterTheFileIsPutBack(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cycleKey(t, b, "k", "w", "before", false)
	if err := b.Close(context.Background()); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = open(t, path, nil)
	var issued int64
	for i := range 3 {
		issued = cycleKey(t, b, "k", "w", fmt.Sprintf("after-%d", i), i == 2)
	}
	issued = max(issued, cycleKey(t, b, "other", "w", "after-other", true))
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, backup, 0o644); err != nil {
		t.Fatal(err)
	}
	r := open(t, path, nil)
	if again := cycleKey(t, r, "k", "x", "restored", false); again > issued {
		t.Fatalf("the restored file issued token %d, above the %d issued after the copy: the test shows no hazard", again, issued)
	}
	floor, err := r.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
	if err != nil {
		t.Fatal(err)
	}
	if floor <= issued {
		t.Fatalf("floor %d, not above the greatest token issued, %d", floor, issued)
	}
	for _, name := range []string{"k", "other", "new"} {
		if tok := cycleKey(t, r, name, "x", "raised-"+name, false); tok <= floor {
			t.Fatalf("%s: token %d after the raise, want above the floor %d (tokens issued before the restore went up to %d)",
				name, tok, floor, issued)
		}
	}
}

// TestRaiseTokensRefusesABadStep: a step outside the bounds is invalid and
// moves nothing.
func TestRaiseTokensRefusesABadStep(t *testing.T) {
	t.Parallel()
	b := open(t, migratedFile(t), nil)
	first := cycleKey(t, b, "k", "w", "0", false)
	for _, by := range []int64{0, -5, protocol.MinTokenRaise - 1, protocol.MaxTokenRaise + 1} {
		if _, err := b.RaiseTokens(ctxT(t), by); protocol.StatusOf(err) != protocol.StatusInvalid {
			t.Fatalf("raise by %d: %v, want invalid", by, err)
		}
	}
	if next := cycleKey(t, b, "k", "w", "1", false); next != first+1 {
		t.Fatalf("token %d after refused raises, want %d: a refused raise moved the counter", next, first+1)
	}
}
