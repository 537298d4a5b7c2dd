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
		{"acquire_release_cycles", func(e *env) {
			const workers, rounds = 6, 15
			keys := []string{"k0", "k1", "k2"}
			var (
				mu       sync.Mutex
				failures []string
				acquired = map[string]int{}
			)
			fail := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, fmt.Sprintf(format, args...))
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
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
						default:
							fail("%s acquire %s: %q %v", owner, k, res.Status, err)
							return
						}
						mu.Lock()
						acquired[k.Name]++
						mu.Unlock()
						l := res.Lease
						res, err = rt.Release(e.ctx, protocol.ReleaseRequest{Key: k, Owner: owner, Token: l.Token, RequestID: fmt.Sprintf("%s-r%d", owner, i)})
						if res.Status != protocol.StatusReleased {
							fail("%s release %s token %d: %q %v", owner, k, l.Token, res.Status, err)
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if len(failures) > 0 {
				e.t.Fatalf("%d failures, first: %s", len(failures), failures[0])
			}
			// Replay the audit trail per key: holders never overlap and
			// tokens strictly increase in audit order.
			type keyState struct {
				holder *audit.Record
				last   int64
				acq    int
			}
			per := map[string]*keyState{}
			for _, r := range e.auditAll(audit.Query{Namespace: e.ns}) {
				s := per[r.Key]
				if s == nil {
					s = &keyState{}
					per[r.Key] = s
				}
				switch r.Op {
				case protocol.OpAcquire:
					if s.holder != nil {
						e.t.Fatalf("key %s: acquire by %s token %d (record %d) while %s holds token %d",
							r.Key, r.Owner, r.Token, r.ID, s.holder.Owner, s.holder.Token)
					}
					if r.Token <= s.last {
						e.t.Fatalf("key %s: token %d (record %d) after token %d", r.Key, r.Token, r.ID, s.last)
					}
					s.holder, s.last = &r, r.Token
					s.acq++
				case protocol.OpRelease:
					if s.holder == nil || s.holder.Token != r.Token || s.holder.Owner != r.Owner {
						e.t.Fatalf("key %s: release by %s token %d (record %d) of a lease it does not hold", r.Key, r.Owner, r.Token, r.ID)
					}
					s.holder = nil
				default:
					e.t.Fatalf("unexpected audit record %+v", r)
				}
			}
			total := 0
			for _, k := range keys {
				s := per[k]
				if s == nil || s.acq != acquired[k] || s.holder != nil {
					e.t.Fatalf("key %s: audit %+v, %d acquires answered", k, s, acquired[k])
				}
				total += s.acq
			}
			if total < len(keys) {
				e.t.Fatalf("only %d acquires took effect", total)
			}
		}},
	}
}
