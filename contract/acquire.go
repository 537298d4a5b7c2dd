package contract

import (
	"github.com/leasestore/leasestore/protocol"
)

func acquireCases() []testCase {
	return []testCase{
		{"free_key", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			if l.Version != protocol.LeaseFormatVersion {
				e.t.Fatalf("lease version %d, want %d", l.Version, protocol.LeaseFormatVersion)
			}
			e.expectLease("get through the second handle", e.get(e.b, "job"), l)
			if n := e.auditCount(); n != 1 {
				e.t.Fatalf("%d audit records, want 1", n)
			}
		}},
		{"conflict_other_owner", func(e *env) {
			held := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL / 2)
			before := e.snapshot("job")
			res, err := e.b.Acquire(e.ctx, e.acquireReq("job", "w2", leaseTTL))
			e.expect("acquire held key by another owner", res, err, protocol.StatusConflict)
			e.expectLease("conflict carries the holder", res.Lease, held)
			if res.Replayed {
				e.t.Fatal("conflict flagged replayed")
			}
			e.unchanged("after conflict", before)
		}},
		{"conflict_same_owner", func(e *env) {
			held := e.acquire(e.a, "job", "w1", leaseTTL)
			before := e.snapshot("job")
			for _, rt := range []*protocol.Runtime{e.a, e.b} {
				res, err := rt.Acquire(e.ctx, e.acquireReq("job", "w1", leaseTTL))
				e.expect("acquire own key with another request id", res, err, protocol.StatusConflict)
				e.expectLease("conflict carries the holder", res.Lease, held)
			}
			e.unchanged("after conflict", before)
		}},
		{"over_expired_lease", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL - precision) // the last instant the lease is live
			res, err := e.b.Acquire(e.ctx, e.acquireReq("job", "w2", leaseTTL))
			e.expect("acquire 1µs before expiry", res, err, protocol.StatusConflict)
			e.expectLease("conflict carries the holder", res.Lease, old)
			e.clock.Advance(precision) // now == expires_at: the lease is no longer live
			l := e.acquire(e.b, "job", "w2", leaseTTL)
			if l.Token <= old.Token {
				e.t.Fatalf("token %d over an expired lease, want more than %d", l.Token, old.Token)
			}
			e.expectLease("get", e.get(e.a, "job"), l)
		}},
		{"same_owner_over_own_expired_lease", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL)
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			if l.Token <= old.Token {
				e.t.Fatalf("token %d, want more than %d", l.Token, old.Token)
			}
		}},
	}
}
