package contract

import (
	"fmt"
	"sync"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

type outcome struct {
	res protocol.Result
	err error
}

func contentionCases() []testCase {
	return []testCase{
		{"one_winner_among_64", func(e *env) {
			const n = 64
			out := make([]outcome, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				rt := e.a
				if i%2 == 1 {
					rt = e.b
				}
				req := protocol.AcquireRequest{Key: e.key("hot"), Owner: fmt.Sprintf("w%02d", i), TTL: leaseTTL, RequestID: fmt.Sprintf("hot-%02d", i)}
				wg.Go(func() {
					<-start
					res, err := rt.Acquire(e.ctx, req)
					out[i] = outcome{res, err}
				})
			}
			close(start)
			wg.Wait()
			var winner *protocol.Lease
			for i, o := range out {
				if o.res.Status == protocol.StatusAcquired {
					if winner != nil {
						e.t.Fatalf("two winners: %s and %s", fmtLease(winner), fmtLease(o.res.Lease))
					}
					e.expect(fmt.Sprintf("acquire %d", i), o.res, o.err, protocol.StatusAcquired)
					winner = o.res.Lease
				}
			}
			if winner == nil {
				e.t.Fatalf("no winner among %d acquires; first outcome %q %v", n, out[0].res.Status, out[0].err)
			}
			conflicts := 0
			for i, o := range out {
				if o.res.Status == protocol.StatusAcquired {
					continue
				}
				e.expect(fmt.Sprintf("acquire %d", i), o.res, o.err, protocol.StatusConflict)
				e.expectHolder(fmt.Sprintf("conflict %d carries the winner", i), o.res.Lease, *winner)
				conflicts++
			}
			if conflicts != n-1 {
				e.t.Fatalf("%d conflicts, want %d", conflicts, n-1)
			}
			e.expectLease("get", e.get(e.a, "hot"), *winner)
			recs := e.auditAll(audit.Query{Namespace: e.ns})
			if len(recs) != 1 || recs[0].Token != winner.Token || recs[0].Owner != winner.Owner {
				e.t.Fatalf("audit after the race: %+v, want one acquire by the winner", recs)
			}
		}},
		{"acquire_renew_release_cycles_with_revokes", func(e *env) {
			// Workers on both handles take, renew and give up leases on a
			// few keys while an operator revokes them. The audit trail is
			// then replayed per key: at most one holder at a time, tokens
			// strictly increasing, every renew, release and revoke acting
			// on the lease then held.
			const workers, rounds = 6, 15
			keys := []string{"k0", "k1", "k2"}
			var (
				mu       sync.Mutex
				failures []string
				effects  = map[protocol.Op]int{}
			)
			fail := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, fmt.Sprintf(format, args...))
			}
			took := func(op protocol.Op) {
				mu.Lock()
				defer mu.Unlock()
				effects[op]++
			}
			// After a revoke, the holder's renew or release finds no row
			// or a newer lease; nothing expires during the test.
			lost := func(st protocol.Status) bool {
				return st == protocol.StatusNotFound || st == protocol.StatusStaleToken
			}
			start := make(chan struct{})
			done := make(chan struct{})
			var wg, revoker sync.WaitGroup
			for w := range workers {
				rt := e.a
				if w%2 == 1 {
					rt = e.b
				}
				owner := fmt.Sprintf("w%d", w)
				wg.Go(func() {
					<-start
					for i := range rounds {
						k := e.key(keys[(w+i)%len(keys)])
						res, err := rt.Acquire(e.ctx, protocol.AcquireRequest{Key: k, Owner: owner, TTL: leaseTTL, RequestID: fmt.Sprintf("%s-a%d", owner, i)})
						switch res.Status {
						case protocol.StatusConflict:
							continue
						case protocol.StatusAcquired:
							took(protocol.OpAcquire)
						default:
							fail("%s acquire %s: %q %v", owner, k, res.Status, err)
							return
						}
						token := res.Lease.Token
						res, err = rt.Renew(e.ctx, protocol.RenewRequest{Key: k, Owner: owner, Token: token, TTL: leaseTTL, RequestID: fmt.Sprintf("%s-n%d", owner, i)})
						switch {
						case res.Status == protocol.StatusRenewed:
							took(protocol.OpRenew)
						case lost(res.Status):
							continue
						default:
							fail("%s renew %s token %d: %q %v", owner, k, token, res.Status, err)
							return
						}
						res, err = rt.Release(e.ctx, protocol.ReleaseRequest{Key: k, Owner: owner, Token: token, RequestID: fmt.Sprintf("%s-r%d", owner, i)})
						switch {
						case res.Status == protocol.StatusReleased:
							took(protocol.OpRelease)
						case lost(res.Status):
						default:
							fail("%s release %s token %d: %q %v", owner, k, token, res.Status, err)
							return
						}
					}
				})
			}
			revoker.Go(func() {
				<-start
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					k := e.key(keys[i%len(keys)])
					res, err := e.b.Revoke(e.ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "churn", RequestID: fmt.Sprintf("ops-%d", i)})
					switch res.Status {
					case protocol.StatusRevoked:
						took(protocol.OpRevoke)
					case protocol.StatusNotFound:
					default:
						fail("revoke %s: %q %v", k, res.Status, err)
						return
					}
				}
			})
			close(start)
			wg.Wait()
			close(done)
			revoker.Wait()
			if len(failures) > 0 {
				e.t.Fatalf("%d failures, first: %s", len(failures), failures[0])
			}
			type keyState struct {
				holder *audit.Record
				last   int64
			}
			per := map[string]*keyState{}
			recorded := map[protocol.Op]int{}
			for _, r := range e.auditAll(audit.Query{Namespace: e.ns}) {
				s := per[r.Key]
				if s == nil {
					s = &keyState{}
					per[r.Key] = s
				}
				recorded[r.Op]++
				if r.Op == protocol.OpAcquire {
					if s.holder != nil {
						e.t.Fatalf("key %s: acquire by %s token %d (record %d) while %s holds token %d",
							r.Key, r.Owner, r.Token, r.ID, s.holder.Owner, s.holder.Token)
					}
					if r.Token <= s.last {
						e.t.Fatalf("key %s: token %d (record %d) after token %d", r.Key, r.Token, r.ID, s.last)
					}
					s.holder, s.last = &r, r.Token
					continue
				}
				if s.holder == nil || s.holder.Token != r.Token || s.holder.Owner != r.Owner {
					e.t.Fatalf("key %s: %s of %s token %d (record %d), but the holder is %+v",
						r.Key, r.Op, r.Owner, r.Token, r.ID, s.holder)
				}
				switch r.Op {
				case protocol.OpRenew:
				case protocol.OpRelease, protocol.OpRevoke:
					s.holder = nil
				default:
					e.t.Fatalf("unexpected audit record %+v", r)
				}
			}
			for _, op := range []protocol.Op{protocol.OpAcquire, protocol.OpRenew, protocol.OpRelease, protocol.OpRevoke} {
				if recorded[op] != effects[op] {
					e.t.Fatalf("%d %s records, %d answered %s", recorded[op], op, effects[op], op)
				}
			}
			if effects[protocol.OpAcquire] < len(keys) {
				e.t.Fatalf("only %d acquires took effect", effects[protocol.OpAcquire])
			}
		}},
		{"racing_retries_with_one_request_id", func(e *env) {
			// A client that retries after a timeout may race its own first
			// attempt. Every attempt with the same id and parameters must
			// answer the one outcome: exactly one takes effect, the others
			// are replays of it, and the trail holds one record.
			const n = 16
			req := e.acquireReq("retried", "w1", leaseTTL)
			out := racing(n, func(i int) outcome {
				rt := e.a
				if i%2 == 1 {
					rt = e.b
				}
				res, err := rt.Acquire(e.ctx, req)
				return outcome{res, err}
			})
			var first *protocol.Lease
			replays := 0
			for i, o := range out {
				e.expect(fmt.Sprintf("attempt %d", i), o.res, o.err, protocol.StatusAcquired)
				if o.res.Replayed {
					replays++
				}
				if first == nil {
					first = o.res.Lease
				}
				e.expectHolder(fmt.Sprintf("attempt %d", i), o.res.Lease, *first)
			}
			if replays != n-1 {
				e.t.Fatalf("%d replays among %d attempts, want %d", replays, n, n-1)
			}
			if recs := e.auditAll(audit.Query{Namespace: e.ns}); len(recs) != 1 {
				e.t.Fatalf("audit holds %d records, want 1: %+v", len(recs), recs)
			}
		}},
		{"racing_reuse_of_one_request_id_with_other_parameters", func(e *env) {
			// The same id sent with different owners at once: one takes
			// effect; every other answers invalid (the id is taken) or
			// conflict (it lost the race for the key) and writes nothing.
			const n = 16
			out := racing(n, func(i int) outcome {
				rt := e.a
				if i%2 == 1 {
					rt = e.b
				}
				req := protocol.AcquireRequest{Key: e.key("reused"), Owner: fmt.Sprintf("w%02d", i), TTL: leaseTTL, RequestID: "shared-id"}
				res, err := rt.Acquire(e.ctx, req)
				return outcome{res, err}
			})
			winners := 0
			for i, o := range out {
				switch o.res.Status {
				case protocol.StatusAcquired:
					winners++
					if o.res.Replayed {
						e.t.Fatalf("attempt %d replayed another owner's acquire", i)
					}
				case protocol.StatusInvalid, protocol.StatusConflict:
					e.expect(fmt.Sprintf("attempt %d", i), o.res, o.err, o.res.Status)
				default:
					e.t.Fatalf("attempt %d: status %q (%v), want acquired, invalid or conflict", i, o.res.Status, o.err)
				}
			}
			if winners != 1 {
				e.t.Fatalf("%d attempts took effect, want 1", winners)
			}
			if recs := e.auditAll(audit.Query{Namespace: e.ns}); len(recs) != 1 {
				e.t.Fatalf("audit holds %d records, want 1: %+v", len(recs), recs)
			}
		}},
	}
}

// racing runs f(0..n-1) on n goroutines released at once and returns the
// outcomes in index order.
func racing(n int, f func(i int) outcome) []outcome {
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}
