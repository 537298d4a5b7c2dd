package contract

import (
	"fmt"
	"sync"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// bulkNote logs whether the backend renews in one call (protocol.BulkRenewer)
// or the runtime falls back to one Renew per lease; the cases hold for both.
func (e *env) bulkNote() {
	if _, ok := e.h.Backend.(protocol.BulkRenewer); !ok {
		e.t.Logf("the backend does not implement protocol.BulkRenewer: RenewMany renews one lease at a time")
	}
}

// acquireMany takes n leases named prefix-i for owner, from 8 goroutines.
func (e *env) acquireMany(prefix, owner string, n int) []protocol.Lease {
	e.t.Helper()
	out := make([]protocol.Lease, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				res, err := e.a.Acquire(e.ctx, e.acquireReq(fmt.Sprintf("%s-%04d", prefix, i), owner, leaseTTL))
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				out[i] = *res.Lease
			}
		})
	}
	wg.Wait()
	if first != nil {
		e.t.Fatalf("acquire %d leases: %v", n, first)
	}
	return out
}

func renewAll(ls []protocol.Lease) []protocol.RenewRequest {
	reqs := make([]protocol.RenewRequest, len(ls))
	for i, l := range ls {
		reqs[i] = protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL}
	}
	return reqs
}

// shortTTL is a lease that the cases let expire.
const shortTTL = time.Second

func renewManyCases() []testCase {
	return []testCase{
		{"thousand_leases_of_one_owner", func(e *env) {
			e.bulkNote()
			held := e.acquireMany("job", "w1", 1000)
			before := e.auditCount()
			e.clock.Advance(leaseTTL / 2)
			now := e.clock.Now()
			results, err := e.a.RenewMany(e.ctx, renewAll(held))
			if err != nil {
				e.t.Fatalf("renew many: %v", err)
			}
			if len(results) != len(held) {
				e.t.Fatalf("%d results for %d leases", len(results), len(held))
			}
			ids := map[string]bool{}
			for i, res := range results {
				if res.Status != protocol.StatusRenewed || res.Op != protocol.OpRenew || res.Lease == nil ||
					res.Lease.Key != held[i].Key || res.Lease.Token != held[i].Token || res.RequestID == "" || res.Replayed {
					e.t.Fatalf("result %d: %+v, want %s renewed", i, res, held[i].Key)
				}
				if ids[res.RequestID] {
					e.t.Fatalf("request id %s given twice", res.RequestID)
				}
				ids[res.RequestID] = true
				if !sameInstant(res.Lease.ExpiresAt, now.Add(renewTTL)) {
					e.t.Fatalf("result %d: expires %v, want about %v", i, res.Lease.ExpiresAt, now.Add(renewTTL))
				}
			}
			// One record per renewal, each with its request id.
			recs := e.auditAll(audit.Query{Namespace: e.ns})
			if got := e.auditCount() - before; got != len(held) {
				e.t.Fatalf("%d audit records for %d renewals", got, len(held))
			}
			renewed := 0
			for _, r := range recs {
				if r.Op == protocol.OpRenew && ids[r.RequestID] && r.Status == protocol.StatusRenewed {
					renewed++
				}
			}
			if renewed != len(held) {
				e.t.Fatalf("%d renew records carry the call's request ids, want %d", renewed, len(held))
			}
			// Renewed by the store: alive past the original expiry.
			e.clock.Advance(leaseTTL/2 + time.Millisecond)
			if l := e.get(e.b, held[999].Key.Name); l == nil || l.Token != held[999].Token {
				e.t.Fatalf("after the original expiry: %v, want the renewed lease", fmtLease(l))
			}
		}},
		{"each_lease_its_own_outcome", func(e *env) {
			e.bulkNote()
			mine := e.acquire(e.a, "mine", "w1", leaseTTL)
			other := e.acquire(e.a, "other", "w2", leaseTTL)
			old := e.acquire(e.a, "moved", "w1", leaseTTL)
			e.release(e.a, old)
			newer := e.acquire(e.a, "moved", "w1", leaseTTL)
			short := e.acquire(e.a, "short", "w1", shortTTL)
			e.clock.Advance(shortTTL + time.Millisecond)
			reqs := []protocol.RenewRequest{
				{Key: mine.Key, Owner: "w1", Token: mine.Token, TTL: renewTTL},
				{Key: other.Key, Owner: "w1", Token: other.Token, TTL: renewTTL},
				{Key: old.Key, Owner: "w1", Token: old.Token, TTL: renewTTL},
				{Key: e.key("never"), Owner: "w1", Token: 7, TTL: renewTTL},
				{Key: short.Key, Owner: "w1", Token: short.Token, TTL: renewTTL},
				{Key: mine.Key, Owner: "", Token: mine.Token, TTL: renewTTL},
				{Key: newer.Key, Owner: "w1", Token: newer.Token, TTL: renewTTL},
			}
			want := []protocol.Status{protocol.StatusRenewed, protocol.StatusNotOwner, protocol.StatusStaleToken,
				protocol.StatusNotFound, protocol.StatusExpired, protocol.StatusInvalid, protocol.StatusRenewed}
			results, err := e.a.RenewMany(e.ctx, reqs)
			if err != nil {
				e.t.Fatalf("renew many: %v", err)
			}
			for i, res := range results {
				if res.Status != want[i] {
					e.t.Fatalf("result %d: %s (%s), want %s", i, res.Status, res.Message, want[i])
				}
				if (res.Err() == nil) != res.Status.Success() {
					e.t.Fatalf("result %d: Err() = %v for %s", i, res.Err(), res.Status)
				}
			}
			if results[1].Lease == nil || results[1].Lease.Owner != "w2" || results[2].Lease == nil || results[2].Lease.Token != newer.Token {
				e.t.Fatalf("refusals carry the current lease: %+v / %+v", results[1].Lease, results[2].Lease)
			}
			if l := e.get(e.b, "other"); l == nil || !sameInstant(l.ExpiresAt, other.ExpiresAt) {
				e.t.Fatalf("the refused renewal changed %s: %s", "other", fmtLease(l))
			}
		}},
		{"replays_and_one_key_twice", func(e *env) {
			e.bulkNote()
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			twice := []protocol.RenewRequest{
				{Key: l.Key, Owner: "w1", Token: l.Token, TTL: renewTTL, RequestID: e.rid()},
				{Key: l.Key, Owner: "w1", Token: l.Token, TTL: 2 * renewTTL, RequestID: e.rid()},
			}
			first, err := e.a.RenewMany(e.ctx, twice)
			if err != nil || first[0].Status != protocol.StatusRenewed || first[1].Status != protocol.StatusRenewed ||
				!first[1].Lease.ExpiresAt.After(first[0].Lease.ExpiresAt) {
				e.t.Fatalf("one key twice: %+v %v, want both renewed, the second last", first, err)
			}
			before := e.auditCount()
			again, err := e.a.RenewMany(e.ctx, twice)
			if err != nil {
				e.t.Fatalf("renew many again: %v", err)
			}
			for i, res := range again {
				if !res.Replayed || res.Status != protocol.StatusRenewed || !sameInstant(res.Lease.ExpiresAt, first[i].Lease.ExpiresAt) {
					e.t.Fatalf("again %d: %+v, want a replay of %+v", i, res, first[i])
				}
			}
			changed := twice[0]
			changed.TTL = leaseTTL
			bad, err := e.a.RenewMany(e.ctx, []protocol.RenewRequest{changed})
			if err != nil || bad[0].Status != protocol.StatusInvalid {
				e.t.Fatalf("a request id reused with other parameters: %+v %v, want invalid", bad, err)
			}
			if n := e.auditCount(); n != before {
				e.t.Fatalf("replays wrote %d audit records", n-before)
			}
		}},
		{"too_many_and_none", func(e *env) {
			res, err := e.a.RenewMany(e.ctx, make([]protocol.RenewRequest, protocol.MaxRenewMany+1))
			if res != nil {
				e.t.Fatalf("too many: %d results", len(res))
			}
			e.checkErr("too many", err, protocol.StatusInvalid, nil)
			res, err = e.a.RenewMany(e.ctx, nil)
			if err != nil || len(res) != 0 {
				e.t.Fatalf("none: %v %v", res, err)
			}
		}},
	}
}
