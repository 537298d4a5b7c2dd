package lincheck_test

import (
	"compress/gzip"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// Hand-made histories. Times are in milliseconds from t0; every lease is
// on one key unless said otherwise.

const t0 = int64(1_900_000_000_000_000_000)

func ms(v float64) int64 { return t0 + int64(v*1e6) }

const long = time.Hour

type hist struct{ h lincheck.History }

// op adds an operation by client from start to end (ms); out nil means it
// never returned.
func (b *hist) op(client int, start, end float64, req lincheck.Request, out *lincheck.Outcome) *hist {
	if req.Key == "" {
		req.Key = "k"
	}
	req.Namespace = "ns"
	o := lincheck.Operation{Process: "p", Client: client, Request: req, Start: ms(start), Outcome: out}
	if out != nil {
		o.End = ms(end)
	}
	b.h.Ops = append(b.h.Ops, o)
	return b
}

func acquire(owner string, ttl time.Duration) lincheck.Request {
	return lincheck.Request{Op: protocol.OpAcquire, Owner: owner, TTL: ttl}
}

func renew(owner string, token int64, ttl time.Duration) lincheck.Request {
	return lincheck.Request{Op: protocol.OpRenew, Owner: owner, Token: token, TTL: ttl}
}

func release(owner string, token int64) lincheck.Request {
	return lincheck.Request{Op: protocol.OpRelease, Owner: owner, Token: token}
}

func revoke(token int64) lincheck.Request {
	return lincheck.Request{Op: protocol.OpRevoke, Owner: "admin", Token: token}
}

func get() lincheck.Request { return lincheck.Request{Op: protocol.OpGet} }

// acquireDelayed is acquire with a lock-delay.
func acquireDelayed(owner string, ttl, delay time.Duration) lincheck.Request {
	r := acquire(owner, ttl)
	r.LockDelay = delay
	return r
}

// lease is a result lease; exp in ms from t0, 0 for none.
func lease(owner string, token int64, exp float64) *lincheck.Lease {
	l := &lincheck.Lease{Owner: owner, Token: token}
	if exp != 0 {
		l.ExpiresAt = ms(exp)
	}
	return l
}

// delayedLease is lease for one with lock-delay d.
func delayedLease(d time.Duration, owner string, token int64, exp float64) *lincheck.Lease {
	l := lease(owner, token, exp)
	l.LockDelay = int64(d)
	return l
}

func out(status protocol.Status, l *lincheck.Lease) *lincheck.Outcome {
	return &lincheck.Outcome{Status: status, Lease: l, Attempts: 1}
}

func replayed(status protocol.Status, l *lincheck.Lease) *lincheck.Outcome {
	return &lincheck.Outcome{Status: status, Lease: l, Replayed: true, Attempts: 2}
}

var unknown = &lincheck.Outcome{Status: protocol.StatusTimeout, Attempts: 3}

// expAt is the expiry of a lease taken at start ms for ttl, in ms.
func expAt(start float64, ttl time.Duration) float64 {
	return start + float64(ttl)/1e6
}

func TestCheckRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    *hist
	}{{
		name: "two holders at once",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(1, 2, 3, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(2.5, long)))),
	}, {
		name: "two holders while a short lease is live",
		h: new(hist).
			op(0, 0, 1, acquire("a", 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 100.5))).
			op(1, 50, 60, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(55, long)))),
	}, {
		name: "a token going backwards",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, long)))).
			op(0, 2, 3, release("a", 5), out(protocol.StatusReleased, lease("a", 5, expAt(0.5, long)))).
			op(1, 4, 5, acquire("b", long), out(protocol.StatusAcquired, lease("b", 3, expAt(4.5, long)))),
	}, {
		name: "a token issued twice",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, lease("a", 5, 0))).
			op(1, 4, 5, acquire("b", long), out(protocol.StatusAcquired, lease("b", 5, expAt(4.5, long)))),
	}, {
		name: "a token not above one issued with an unknown outcome",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, long)))).
			op(0, 2, 3, release("a", 5), out(protocol.StatusReleased, lease("a", 5, 0))).
			op(1, 4, 6, acquire("b", long), unknown).
			op(2, 5, 6, get(), out(protocol.StatusFound, lease("b", 9, expAt(5, long)))).
			op(2, 7, 8, revoke(0), out(protocol.StatusRevoked, lease("b", 9, 0))).
			op(0, 9, 10, acquire("a", long), out(protocol.StatusAcquired, lease("a", 9, expAt(9.5, long)))),
	}, {
		name: "a renew succeeding after another acquire",
		h: new(hist).
			op(0, 0, 1, acquire("a", 50*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 50.5))).
			op(1, 100, 101, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(100.5, long)))).
			op(0, 200, 201, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 1, expAt(200.5, long)))),
	}, {
		name: "a stale release succeeding",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, lease("a", 1, 0))).
			op(1, 4, 5, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(4.5, long)))).
			op(0, 6, 7, release("a", 1), out(protocol.StatusReleased, lease("a", 1, 0))),
	}, {
		name: "a renew that changes the token",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(0, 2, 3, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 2, expAt(2.5, long)))),
	}, {
		name: "a get that finds a released lease",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(0, 2, 3, release("a", 1), out(protocol.StatusReleased, lease("a", 1, 0))).
			op(1, 4, 5, get(), out(protocol.StatusFound, lease("a", 1, expAt(0.5, long)))),
	}, {
		name: "an acquire during the lock-delay of a revoked lease",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(50.5, long)))),
	}, {
		name: "an acquire during the lock-delay of an expired lease",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", 10*time.Millisecond, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, 10.5))).
			op(1, 50, 51, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(50.5, long)))),
	}, {
		name: "a lock-delay conflict after the delay ended",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 10*time.Millisecond), out(protocol.StatusAcquired, delayedLease(10*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(10*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, acquire("b", long), out(protocol.StatusConflict, delayedLease(10*time.Millisecond, "a", 1, 2.5))),
	}, {
		name: "a get without the ended lease during the lock-delay of a revoked lease",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, nil)),
	}, {
		name: "a get without the ended lease during the lock-delay of an expired lease",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", 10*time.Millisecond, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, 10.5))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, nil)),
	}, {
		name: "a get carrying an ended lease after the delay ended",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 10*time.Millisecond), out(protocol.StatusAcquired, delayedLease(10*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(10*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, delayedLease(10*time.Millisecond, "a", 1, 2.5))),
	}, {
		name: "a get carrying another lease than the ended one",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, lease("b", 2, 2.5))),
	}, {
		name: "a not_found get carrying the live lease",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))),
	}, {
		name: "a not_found get carrying a lease without a lock-delay",
		h: new(hist).
			op(0, 0, 1, acquire("a", 10*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 10.5))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, lease("a", 1, 10.5))),
	}, {
		name: "a get during a revoke's lock-delay carrying the ended lease without its lock-delay",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, get(), out(protocol.StatusNotFound, lease("a", 1, 2.5))),
	}, {
		name: "a conflict during a revoke's lock-delay carrying the lease's planned expiry, not its end",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, acquire("b", long), out(protocol.StatusConflict, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))),
	}, {
		name: "a replayed renew without the lease's lock-delay",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(0, 2, 3, renew("a", 1, long), replayed(protocol.StatusRenewed, lease("a", 1, expAt(2.5, long)))),
	}, {
		name: "a release answering another lock-delay than the lease's",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(0, 2, 3, release("a", 1), out(protocol.StatusReleased, delayedLease(time.Second, "a", 1, expAt(0.5, long)))),
	}, {
		name: "an acquire answering another lock-delay than it asked for",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))),
	}, {
		name: "a renew without a ttl that does not keep the lease's",
		h: new(hist).
			op(0, 0, 1, acquire("a", 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 100.5))).
			op(0, 10, 11, renew("a", 1, 0), out(protocol.StatusRenewed, lease("a", 1, expAt(10.5, long)))),
	}, {
		name: "a conflict on a free key",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusConflict, lease("b", 1, expAt(0.5, long)))),
	}, {
		name: "a conflict naming someone else than the holder",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(1, 2, 3, acquire("b", long), out(protocol.StatusConflict, lease("c", 1, expAt(0.5, long)))),
	}, {
		name: "expired while surely live",
		h: new(hist).
			op(0, 0, 1, acquire("a", 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 100.5))).
			op(0, 10, 11, renew("a", 1, long), out(protocol.StatusExpired, lease("a", 1, 100.5))),
	}, {
		name: "not_found for a live lease",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(1, 2, 3, get(), out(protocol.StatusNotFound, nil)),
	}, {
		name: "stale_token for the current token",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(0, 2, 3, release("a", 1), out(protocol.StatusStaleToken, lease("a", 1, expAt(0.5, long)))),
	}, {
		name: "not_owner for a stale token",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 4, expAt(0.5, long)))).
			op(1, 2, 3, renew("b", 3, long), out(protocol.StatusNotOwner, lease("a", 4, expAt(0.5, long)))),
	}, {
		name: "an acquire whose expiry is not TTL after the call",
		h: new(hist).
			op(0, 0, 1, acquire("a", 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 300))),
	}, {
		name: "a revoke of a free key",
		h: new(hist).
			op(0, 0, 1, revoke(0), out(protocol.StatusRevoked, lease("a", 1, 0))),
	}, {
		name: "a status the operation cannot answer",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusInvalid, nil)),
	}, {
		name: "an unknown acquire cannot explain two holders",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(2, 0, 50, acquire("c", long), unknown).
			op(1, 2, 3, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(2.5, long)))),
	}, {
		name: "an operation of a lost process taking effect after it was lost",
		h: func() *hist {
			b := new(hist).
				op(0, 0, 1, acquire("a", long), nil). // never returned; process lost at 50
				op(1, 60, 70, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(65, long)))).
				op(1, 71, 72, release("b", 2), out(protocol.StatusReleased, lease("b", 2, 0))).
				op(2, 80, 90, get(), out(protocol.StatusFound, lease("a", 3, expAt(75, long))))
			b.h.Ops[1].Process, b.h.Ops[2].Process, b.h.Ops[3].Process = "q", "q", "q"
			b.h.Lost("p", time.Unix(0, ms(50)))
			return b
		}(),
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			res, err := lincheck.Check(&c.h.h, &lincheck.CheckOptions{Dir: dir, Name: t.Name()})
			if !errors.Is(err, lincheck.ErrNotLinearizable) {
				t.Fatalf("Check: %v, want ErrNotLinearizable", err)
			}
			if res.Visualization == "" || !strings.Contains(err.Error(), res.Visualization) || !strings.Contains(err.Error(), res.History) {
				t.Fatalf("the error does not name the files: %v (result %+v)", err, res)
			}
			for _, f := range []string{res.Visualization, res.History} {
				if st, err := os.Stat(f); err != nil || st.Size() == 0 {
					t.Fatalf("%s: %v", f, err)
				}
			}
			back, err := lincheck.ReadHistoryFiles(res.History)
			if err != nil {
				t.Fatal(err)
			}
			if back.Len() != c.h.h.Len() {
				t.Fatalf("the written history has %d operations, want %d", back.Len(), c.h.h.Len())
			}
			if _, err := lincheck.Check(back, &lincheck.CheckOptions{Dir: dir}); !errors.Is(err, lincheck.ErrNotLinearizable) {
				t.Fatalf("the written history, checked again: %v", err)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    *hist
	}{{
		name: "a lease's life, tokens with gaps",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(0, 2, 3, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 1, expAt(2.5, long)))).
			op(1, 4, 5, get(), out(protocol.StatusFound, lease("a", 1, expAt(2.5, long)))).
			op(0, 6, 7, release("a", 1), out(protocol.StatusReleased, lease("a", 1, expAt(2.5, long)))).
			op(0, 8, 9, release("a", 1), out(protocol.StatusNotFound, nil)).
			op(1, 10, 11, acquire("b", long), out(protocol.StatusAcquired, lease("b", 7, expAt(10.5, long)))).
			op(0, 12, 13, renew("a", 1, long), out(protocol.StatusStaleToken, lease("b", 7, expAt(10.5, long)))).
			op(0, 14, 15, renew("a", 9, long), out(protocol.StatusNotOwner, lease("b", 7, expAt(10.5, long)))).
			op(0, 16, 17, release("a", 7), out(protocol.StatusNotOwner, lease("b", 7, expAt(10.5, long)))).
			op(2, 18, 19, revoke(6), out(protocol.StatusStaleToken, lease("b", 7, expAt(10.5, long)))).
			op(2, 20, 21, revoke(8), out(protocol.StatusNotOwner, lease("b", 7, expAt(10.5, long)))).
			op(2, 22, 23, revoke(7), out(protocol.StatusRevoked, lease("b", 7, expAt(10.5, long)))).
			op(1, 24, 25, renew("b", 7, long), out(protocol.StatusNotFound, nil)),
	}, {
		name: "concurrent acquires, one winner",
		h: new(hist).
			op(0, 0, 10, acquire("a", long), out(protocol.StatusConflict, lease("b", 2, expAt(5, long)))).
			op(1, 1, 9, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(5, long)))).
			op(2, 2, 8, get(), out(protocol.StatusNotFound, nil)),
	}, {
		name: "an acquire of unknown outcome that took effect",
		h: new(hist).
			op(0, 0, 30, acquire("a", long), unknown).
			op(1, 40, 41, acquire("b", long), out(protocol.StatusConflict, lease("a", 4, expAt(20, long)))).
			op(1, 42, 43, get(), out(protocol.StatusFound, lease("a", 4, expAt(20, long)))).
			op(2, 44, 45, revoke(4), out(protocol.StatusRevoked, lease("a", 4, expAt(20, long)))).
			op(1, 46, 47, acquire("b", long), out(protocol.StatusAcquired, lease("b", 5, expAt(46.5, long)))),
	}, {
		name: "an acquire of unknown outcome that did not",
		h: new(hist).
			op(0, 0, 30, acquire("a", long), &lincheck.Outcome{Status: protocol.StatusUnavailable}).
			op(1, 40, 41, acquire("b", long), out(protocol.StatusAcquired, lease("b", 1, expAt(40.5, long)))),
	}, {
		name: "an operation that never returned, in a lost process",
		h: func() *hist {
			b := new(hist).
				op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
				op(0, 2, 0, release("a", 1), nil).
				op(1, 60, 61, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(60.5, long))))
			b.h.Ops[2].Process = "q"
			b.h.Lost("p", time.Unix(0, ms(50)))
			return b
		}(),
	}, {
		name: "a killed process's acquire seen later",
		h: new(hist).
			op(0, 0, 0, acquire("a", long), nil).
			op(1, 60, 70, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(65, long)))).
			op(1, 71, 72, release("b", 2), out(protocol.StatusReleased, lease("b", 2, 0))).
			op(2, 80, 90, get(), out(protocol.StatusFound, lease("a", 3, expAt(75, long)))),
	}, {
		name: "expiry, takeover, stale holder",
		h: new(hist).
			op(0, 0, 1, acquire("a", 50*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 50.5))).
			op(1, 20, 21, get(), out(protocol.StatusFound, lease("a", 1, 50.5))).
			op(1, 60, 61, get(), out(protocol.StatusNotFound, nil)).
			op(2, 70, 71, revoke(0), out(protocol.StatusNotFound, nil)).
			op(0, 80, 81, renew("a", 1, long), out(protocol.StatusExpired, lease("a", 1, 50.5))).
			op(1, 100, 101, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(100.5, long)))).
			op(0, 200, 201, renew("a", 1, long), out(protocol.StatusStaleToken, lease("b", 2, expAt(100.5, long)))).
			op(0, 202, 203, release("a", 1), out(protocol.StatusStaleToken, nil)),
	}, {
		name: "expiry judged anywhere inside the operation",
		h: new(hist).
			op(0, 0, 1, acquire("a", 50*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 50.5))).
			op(1, 45, 55, acquire("b", long), out(protocol.StatusConflict, lease("a", 1, 50.5))).
			op(2, 46, 56, acquire("c", long), out(protocol.StatusAcquired, lease("c", 2, expAt(51, long)))),
	}, {
		name: "a replayed acquire after someone else took the key",
		h: new(hist).
			op(0, 0, 300, acquire("a", 50*time.Millisecond), replayed(protocol.StatusAcquired, lease("a", 1, 50.5))).
			op(1, 100, 110, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(105, long)))),
	}, {
		name: "a retried renew whose first attempt took effect",
		h: new(hist).
			op(0, 0, 1, acquire("a", long), out(protocol.StatusAcquired, lease("a", 1, expAt(0.5, long)))).
			op(0, 2, 40, renew("a", 1, long), replayed(protocol.StatusRenewed, lease("a", 1, expAt(3, long)))).
			op(1, 30, 31, get(), out(protocol.StatusFound, lease("a", 1, expAt(3, long)))),
	}, {
		name: "unknown renew and release",
		h: new(hist).
			op(0, 0, 1, acquire("a", 50*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 50.5))).
			op(0, 2, 10, renew("a", 1, long), unknown).
			op(0, 11, 20, release("a", 1), unknown).
			op(1, 100, 101, get(), out(protocol.StatusFound, lease("a", 1, expAt(5, long)))).
			op(1, 102, 103, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(102.5, long)))),
	}, {
		name: "lock-delays after a revoke and an expiry, a release frees at once",
		h: new(hist).
			op(0, 0, 1, acquireDelayed("a", long, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "a", 1, expAt(0.5, long)))).
			op(2, 2, 3, revoke(0), out(protocol.StatusRevoked, delayedLease(100*time.Millisecond, "a", 1, 0))).
			op(1, 50, 51, acquire("b", long), out(protocol.StatusConflict, delayedLease(100*time.Millisecond, "a", 1, 2.5))).
			op(1, 60, 61, get(), out(protocol.StatusNotFound, delayedLease(100*time.Millisecond, "a", 1, 2.5))).
			op(1, 104, 105, get(), out(protocol.StatusNotFound, nil)).
			op(1, 110, 111, acquireDelayed("b", 10*time.Millisecond, 100*time.Millisecond), out(protocol.StatusAcquired, delayedLease(100*time.Millisecond, "b", 2, 120.5))).
			op(1, 130, 131, get(), out(protocol.StatusNotFound, delayedLease(100*time.Millisecond, "b", 2, 120.5))).
			op(0, 150, 151, acquire("a", long), out(protocol.StatusConflict, delayedLease(100*time.Millisecond, "b", 2, 120.5))).
			op(0, 230, 231, acquireDelayed("a", long, time.Hour), out(protocol.StatusAcquired, delayedLease(time.Hour, "a", 3, expAt(230.5, long)))).
			op(0, 240, 241, release("a", 3), out(protocol.StatusReleased, delayedLease(time.Hour, "a", 3, expAt(230.5, long)))).
			op(1, 242, 243, acquire("b", long), out(protocol.StatusAcquired, lease("b", 4, expAt(242.5, long)))).
			op(1, 244, 245, revoke(0), out(protocol.StatusRevoked, lease("b", 4, 0))).
			op(1, 246, 247, get(), out(protocol.StatusNotFound, nil)),
	}, {
		name: "a renew without a ttl keeps the last one",
		h: new(hist).
			op(0, 0, 1, acquire("a", 100*time.Millisecond), out(protocol.StatusAcquired, lease("a", 1, 100.5))).
			op(0, 10, 11, renew("a", 1, 0), out(protocol.StatusRenewed, lease("a", 1, 110.5))).
			op(0, 20, 21, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 1, expAt(20.5, long)))).
			op(0, 30, 31, renew("a", 1, 0), out(protocol.StatusRenewed, lease("a", 1, expAt(30.5, long)))),
	}, {
		name: "keys are independent",
		h: new(hist).
			op(0, 0, 1, lincheck.Request{Op: protocol.OpAcquire, Key: "x", Owner: "a", TTL: long}, out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, long)))).
			op(1, 2, 3, lincheck.Request{Op: protocol.OpAcquire, Key: "y", Owner: "b", TTL: long}, out(protocol.StatusAcquired, lease("b", 3, expAt(2.5, long)))),
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := lincheck.Check(&c.h.h, &lincheck.CheckOptions{Dir: t.TempDir()})
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if res.Operations != c.h.h.Len() || res.Visualization != "" {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestCheckEmpty(t *testing.T) {
	t.Parallel()
	if _, err := lincheck.Check(&lincheck.History{}, nil); err == nil {
		t.Fatal("an empty history passed")
	}
}

// With sweeping, a holder's renew or release after its lease ended more
// than the grace ago may answer not_found (the row was swept), and the key
// is free afterwards with its token bound kept; without sweeping, or within
// the grace, that answer is a violation.
func TestCheckSweeping(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Millisecond
	h := func() *lincheck.History {
		return &new(hist).
			op(0, 0, 1, acquire("a", ttl), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, ttl)))).
			op(0, 40, 41, renew("a", 5, ttl), out(protocol.StatusNotFound, nil)).
			op(1, 42, 43, acquire("b", ttl), out(protocol.StatusAcquired, lease("b", 6, expAt(42.5, ttl)))).h
	}
	dir := t.TempDir()
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir, Sweeping: true, SweepGrace: 20 * time.Millisecond}); err != nil {
		t.Fatalf("swept past the grace: %v", err)
	}
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("not_found for an expired, unswept lease of the caller: %v, want a violation", err)
	}
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir, Sweeping: true, SweepGrace: time.Second}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("not_found within the grace: %v, want a violation", err)
	}
	// A token reissued after a sweep is still a violation.
	bad := h()
	bad.Ops[2].Outcome = out(protocol.StatusAcquired, lease("b", 5, expAt(42.5, ttl)))
	if _, err := lincheck.Check(bad, &lincheck.CheckOptions{Dir: dir, Sweeping: true}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("token 5 issued again after a sweep: %v, want a violation", err)
	}
}

// A revoke naming an older token answers not_found once the ended lease's
// row was swept (there is nothing left to compare the token with). Without
// sweeping, or within the grace, the store would have answered stale_token,
// so not_found is a violation there.
func TestCheckSweepingRevokeOfStaleToken(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Millisecond
	h := func() *lincheck.History {
		return &new(hist).
			op(0, 0, 1, acquire("a", ttl), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, ttl)))).
			op(1, 40, 41, revoke(4), out(protocol.StatusNotFound, nil)).
			op(1, 42, 43, acquire("b", ttl), out(protocol.StatusAcquired, lease("b", 6, expAt(42.5, ttl)))).h
	}
	dir := t.TempDir()
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir, Sweeping: true, SweepGrace: 20 * time.Millisecond}); err != nil {
		t.Fatalf("swept past the grace: %v", err)
	}
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("not_found for a stale token while the row is kept: %v, want a violation", err)
	}
	if _, err := lincheck.Check(h(), &lincheck.CheckOptions{Dir: dir, Sweeping: true, SweepGrace: time.Second}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("not_found within the grace: %v, want a violation", err)
	}
}

// sweeping-revoke-of-stale-token.jsonl.gz is a history recorded by
// sqlstore/postgres's TestLinearizableWhileSweeping that an earlier model
// rejected: a revoke naming token 198 answered not_found after lease 199
// had expired and its row had been swept. The store was right (the model
// expected stale_token from a row that was gone); this pins that the
// checker accepts it.
func TestSweptRevokeHistoryIsLinearizable(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/sweeping-revoke-of-stale-token.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := lincheck.ReadHistory(z)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Dir: t.TempDir(), Sweeping: true, SweepGrace: time.Nanosecond})
	if err != nil {
		t.Fatalf("%v (%v)", err, res)
	}
}

// With LateExpiry, a lease may stay live for that long past its expires_at
// (a renew by its holder succeeds, another owner's acquire conflicts), but
// it may never end early: an acquire by another owner before expires_at is
// a violation whatever the allowance.
func TestCheckLateExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Millisecond
	late := func() *lincheck.History {
		return &new(hist).
			op(0, 0, 1, acquire("a", ttl), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, ttl)))).
			op(1, 300, 301, acquire("b", ttl), out(protocol.StatusConflict, lease("a", 5, expAt(0.5, ttl)))).
			op(0, 400, 401, renew("a", 5, ttl), out(protocol.StatusRenewed, lease("a", 5, expAt(400.5, ttl)))).h
	}
	dir := t.TempDir()
	if _, err := lincheck.Check(late(), &lincheck.CheckOptions{Dir: dir, LateExpiry: time.Second}); err != nil {
		t.Fatalf("live 400 ms past expires_at with a 1s allowance: %v", err)
	}
	if _, err := lincheck.Check(late(), &lincheck.CheckOptions{Dir: dir}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("live 400 ms past expires_at without an allowance: %v, want a violation", err)
	}
	if _, err := lincheck.Check(late(), &lincheck.CheckOptions{Dir: dir, LateExpiry: 100 * time.Millisecond}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("live 400 ms past expires_at with a 100 ms allowance: %v, want a violation", err)
	}
	early := &new(hist).
		op(0, 0, 1, acquire("a", ttl), out(protocol.StatusAcquired, lease("a", 5, expAt(0.5, ttl)))).
		op(1, 3, 4, acquire("b", ttl), out(protocol.StatusAcquired, lease("b", 6, expAt(3.5, ttl)))).h
	if _, err := lincheck.Check(early, &lincheck.CheckOptions{Dir: dir, LateExpiry: time.Second}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("taken over 6 ms before expires_at: %v, want a violation", err)
	}
}

// With LateExpiry, a lock-delay too may end that much late (etcd keeps it
// with an etcd lease, as expiry): a conflict carrying the ended lease
// 190 ms after the delay ended, after an expiry or a revoke, passes with
// a 1 s allowance and not without one; an acquire within the delay is a
// violation whatever the allowance.
func TestCheckLateLockDelay(t *testing.T) {
	t.Parallel()
	const ttl, delay = 10 * time.Millisecond, 100 * time.Millisecond
	expired := new(hist).
		op(0, 0, 1, acquireDelayed("a", ttl, delay), out(protocol.StatusAcquired, delayedLease(delay, "a", 1, expAt(0.5, ttl)))).
		op(1, 300, 301, acquire("b", long), out(protocol.StatusConflict, delayedLease(delay, "a", 1, expAt(0.5, ttl)))).h
	revoked := new(hist).
		op(0, 0, 1, acquireDelayed("a", long, delay), out(protocol.StatusAcquired, delayedLease(delay, "a", 1, expAt(0.5, long)))).
		op(2, 10, 11, revoke(0), out(protocol.StatusRevoked, delayedLease(delay, "a", 1, 0))).
		op(1, 300, 301, acquire("b", long), out(protocol.StatusConflict, delayedLease(delay, "a", 1, 10.5))).h
	dir := t.TempDir()
	for what, h := range map[string]lincheck.History{"expired": expired, "revoked": revoked} {
		if _, err := lincheck.Check(&h, &lincheck.CheckOptions{Dir: dir, LateExpiry: time.Second}); err != nil {
			t.Errorf("%s: a lock-delay 190 ms late with a 1s allowance: %v", what, err)
		}
		if _, err := lincheck.Check(&h, &lincheck.CheckOptions{Dir: dir}); !errors.Is(err, lincheck.ErrNotLinearizable) {
			t.Errorf("%s: a lock-delay 190 ms late without an allowance: %v, want a violation", what, err)
		}
	}
	early := &new(hist).
		op(0, 0, 1, acquireDelayed("a", ttl, delay), out(protocol.StatusAcquired, delayedLease(delay, "a", 1, expAt(0.5, ttl)))).
		op(1, 50, 51, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(50.5, long)))).h
	if _, err := lincheck.Check(early, &lincheck.CheckOptions{Dir: dir, LateExpiry: time.Second}); !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Errorf("taken 60 ms before the lock-delay ended: %v, want a violation", err)
	}
}

// More histories that bend DESIGN.md, each refused: answers after a
// lease ran out, a stale token answered to its holder, a replay whose
// retries all began after the expiry.
func TestCheckRejectsAnswersPastExpiry(t *testing.T) {
	short := 50 * time.Millisecond
	a := func() *hist {
		return new(hist).op(0, 0, 1, acquire("a", short), out(protocol.StatusAcquired, lease("a", 1, 50.5)))
	}
	cases := map[string]*hist{
		"renew after expiry answered renewed":           a().op(0, 200, 201, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 1, expAt(200.5, long)))),
		"release after expiry answered released":        a().op(0, 200, 201, release("a", 1), out(protocol.StatusReleased, lease("a", 1, 50.5))),
		"revoke after expiry answered revoked":          a().op(1, 200, 201, revoke(1), out(protocol.StatusRevoked, lease("a", 1, 50.5))),
		"get after expiry answered found":               a().op(1, 200, 201, get(), out(protocol.StatusFound, lease("a", 1, 50.5))),
		"renew after expiry answered not_found":         a().op(0, 200, 201, renew("a", 1, long), out(protocol.StatusNotFound, nil)),
		"renew after release answered expired":          a().op(0, 2, 3, release("a", 1), out(protocol.StatusReleased, lease("a", 1, 50.5))).op(0, 200, 201, renew("a", 1, long), out(protocol.StatusExpired, nil)),
		"stale token answered for the holder":           a().op(0, 2, 3, renew("a", 1, short), out(protocol.StatusStaleToken, nil)),
		"conflict on an expired key, no delay":          a().op(1, 200, 201, acquire("b", long), out(protocol.StatusConflict, lease("a", 1, 50.5))),
		"acquire during a renewed lease":                a().op(0, 10, 11, renew("a", 1, long), out(protocol.StatusRenewed, lease("a", 1, expAt(10.5, long)))).op(1, 200, 201, acquire("b", long), out(protocol.StatusAcquired, lease("b", 2, expAt(200.5, long)))),
		"replayed renew whose chain began after expiry": a().op(0, 200, 301, renew("a", 1, long), replayed(protocol.StatusRenewed, lease("a", 1, expAt(250, long)))),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := lincheck.Check(&h.h, &lincheck.CheckOptions{Dir: t.TempDir()}); !errors.Is(err, lincheck.ErrNotLinearizable) {
				t.Fatalf("Check: %v, want ErrNotLinearizable", err)
			}
		})
	}
}
