// Package changetimes checks that a backend records the time a change took
// effect, after any wait for its key: Contend makes callers on two handles
// fight over two keys while a sweeper with no grace removes ended rows,
// and Check reads the trail and fails the test on an acquire that started
// before the key's previous lease ended (its release or revoke, else its
// expiry), or an acquire whose expiry is not its start plus the TTL.
//
// For tests only; it imports no database driver. Both SQL backends' tests
// use it, each with its own clock (the server's, the machine's).
package changetimes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// TTL is the TTL of the leases Contend takes.
const TTL = 30 * time.Millisecond

// Handle is a backend that sweeps (both SQL backends).
type Handle interface {
	protocol.Backend
	protocol.Sweeper
}

// Contend runs 12 callers spread over handles for d, each acquiring the
// keys k0 and k1 of namespace ns in turn with TTL and releasing three
// leases in four (the fourth is left to expire), while the first handle
// sweeps every millisecond with no grace. An answer other than a status
// or unavailable (a hot key changed under an operation several times)
// fails t.
func Contend(t testing.TB, handles []Handle, ns string, d time.Duration) {
	t.Helper()
	keys := []string{"k0", "k1"}
	stop := time.Now().Add(d)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for g := range 12 {
		b := handles[g%len(handles)]
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", g)
			for i := 0; time.Now().Before(stop); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				k := protocol.Key{Namespace: ns, Name: keys[i%len(keys)]}
				res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: owner, TTL: TTL, RequestID: protocol.RandomRequestID()})
				if err == nil && res.Status == protocol.StatusAcquired && i%4 != 0 {
					_, err = b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: owner, Token: res.Lease.Token,
						RequestID: protocol.RandomRequestID()})
				}
				cancel()
				if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(stop) {
			if _, err := handles[0].Sweep(context.Background(), 100, 0); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Check reads ns's trail and fails t on an acquire that started before the
// key's previous lease ended, or whose expiry is not its time plus TTL; it
// also fails t when fewer than 20 acquires happened (no contention).
func Check(t testing.TB, r audit.Reader, ns string) {
	t.Helper()
	type lease struct {
		owner string
		token int64
		end   time.Time // the release or revoke; else the expiry
	}
	last := map[string]*lease{}
	var acquires, overlaps int
	q := audit.Query{Namespace: ns, Limit: audit.MaxLimit}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := r.ReadAudit(ctx, q)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Records {
			l := last[rec.Key]
			switch rec.Op {
			case protocol.OpAcquire:
				acquires++
				if l != nil && rec.At.Before(l.end) {
					overlaps++
					if overlaps <= 5 {
						t.Errorf("record %d: %s acquired %s (token %d) at %s, %s before the lease of %s (token %d) ended at %s",
							rec.ID, rec.Owner, rec.Key, rec.Token, rec.At.Format(time.StampMicro), l.end.Sub(rec.At),
							l.owner, l.token, l.end.Format(time.StampMicro))
					}
				}
				last[rec.Key] = &lease{rec.Owner, rec.Token, rec.ExpiresAt}
				if d := rec.ExpiresAt.Sub(rec.At); d != TTL {
					t.Errorf("record %d: acquired at %s, expires %s later, want the TTL %s", rec.ID, rec.At, d, TTL)
				}
			case protocol.OpRelease, protocol.OpRevoke:
				if l == nil || l.token != rec.Token {
					t.Fatalf("record %d: %s of token %d, the key's lease is %+v", rec.ID, rec.Op, rec.Token, l)
				}
				l.end = rec.At
			default:
				t.Fatalf("record %d: unexpected %s", rec.ID, rec.Op)
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	t.Logf("%d acquires, %d started before the previous lease of their key ended", acquires, overlaps)
	if acquires < 20 {
		t.Fatalf("only %d acquires: the callers did not contend", acquires)
	}
}
