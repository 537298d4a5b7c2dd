package contract

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// retentionCases check audit.Pruner, for harnesses whose Audit reader
// implements it (both SQL backends do); others skip them.
func retentionCases() []testCase {
	pruner := func(e *env) audit.Pruner {
		p, ok := e.audit.(audit.Pruner)
		if !ok {
			e.t.Skip("the harness's audit reader does not implement audit.Pruner")
		}
		return p
	}
	return []testCase{
		{"prune_removes_older_records_and_is_recorded", func(e *env) {
			p := pruner(e)
			l := e.acquire(e.a, "old", "w1", leaseTTL)
			e.clock.Advance(time.Second)
			e.release(e.a, l)
			e.clock.Advance(time.Second)
			cut := e.clock.Now()
			kept := e.acquire(e.b, "new", "w2", leaseTTL)
			e.clock.Advance(time.Second)

			res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()})
			if err != nil {
				e.t.Fatalf("prune: %v", err)
			}
			if res.Removed != 2 {
				e.t.Fatalf("prune removed %d records, want the acquire and release before the cut-off", res.Removed)
			}
			all := e.auditAll(audit.Query{})
			if len(all) != 2 || all[0].Key != "new" || all[0].Token != kept.Token || all[1].Op != audit.OpPrune {
				e.t.Fatalf("trail after prune: %+v, want the newer acquire and the prune's record", all)
			}
			rec := all[1]
			if rec.Status != audit.StatusPruned || rec.Actor != "ops" || rec.ID != res.Record.ID || rec.ID <= all[0].ID ||
				rec.Namespace != "" || rec.Key != "" {
				e.t.Fatalf("prune record %+v (result %+v)", rec, res.Record)
			}
			// Pruning again removes nothing older and records again.
			res, err = p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()})
			if err != nil || res.Removed != 0 {
				e.t.Fatalf("second prune: %+v, %v; want nothing removed", res, err)
			}
			// The lease state is untouched: the newer lease is still held.
			e.expectLease("get after prune", e.get(e.a, "new"), kept)
		}},
		{"prune_refuses_bad_requests_and_writes_nothing", func(e *env) {
			p := pruner(e)
			l := e.acquire(e.a, "k", "w1", leaseTTL)
			e.clock.Advance(time.Second)
			used := e.rid()
			if _, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: l.AcquiredAt, Actor: "ops", RequestID: used}); err != nil {
				e.t.Fatal(err)
			}
			before := e.auditCount()
			for what, r := range map[string]audit.PruneRequest{
				"no cut-off":     {Actor: "ops", RequestID: e.rid()},
				"no actor":       {Before: e.clock.Now(), RequestID: e.rid()},
				"no request id":  {Before: e.clock.Now(), Actor: "ops"},
				"reused request": {Before: e.clock.Now(), Actor: "ops", RequestID: used},
			} {
				_, err := p.PruneAudit(e.ctx, r)
				if !errors.Is(err, protocol.ErrInvalid) {
					e.t.Fatalf("prune with %s: %v, want invalid", what, err)
				}
			}
			if after := e.auditCount(); after != before {
				e.t.Fatalf("refused prunes changed the trail: %d records, want %d", after, before)
			}
		}},
		{"prune_refuses_a_cut_off_after_the_store_time", func(e *env) {
			// A cut-off ahead of the store's clock (a typo, or a client whose
			// clock runs ahead) would remove the records of operations that
			// just committed: the retry of an acquire whose answer was lost
			// would then answer conflict instead of its replay.
			p := pruner(e)
			req := e.acquireReq("k", "w1", leaseTTL)
			l := e.acquireWith(e.a, req)
			e.clock.Advance(time.Second)
			before := e.auditCount()
			cut := e.clock.Now().Add(time.Minute)
			_, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()})
			if !errors.Is(err, protocol.ErrInvalid) {
				e.t.Fatalf("prune with a cut-off a minute after the store's time: %v, want invalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, cut.UTC().Format(time.RFC3339Nano)) || !strings.Contains(msg, "store's time") {
				e.t.Fatalf("prune refusal %q names not the cut-off and the store's time", msg)
			}
			if after := e.auditCount(); after != before {
				e.t.Fatalf("the refused prune changed the trail: %d records, want %d", after, before)
			}
			res, err := e.a.Acquire(e.ctx, req)
			e.expect("retry of the acquire after the refused prune", res, err, protocol.StatusAcquired)
			if !res.Replayed || res.Lease == nil || res.Lease.Token != l.Token {
				e.t.Fatalf("retry of the acquire: replayed=%v lease %v, want the replay of token %d", res.Replayed, res.Lease, l.Token)
			}
		}},
		{"prune_keeps_the_records_retries_of_live_leases_are_answered_from", func(e *env) {
			// A cut-off at the store's time (`leasectl audit prune
			// --before 0s --yes`), or just before it, is accepted. It
			// removed the record that the retry of a still-live lease's
			// acquire (same request id, answer lost) is answered from, so
			// the retry answered conflict instead of its replay; and so for
			// the retry of its latest renew. A prune keeps those two
			// records of each live lease, and removes every other record
			// before the cut-off: an earlier renew's, and the records of
			// leases released or expired. A follower whose cursor lies
			// before a record it removed is still refused, and once the
			// lease has ended, a prune removes the records it kept.
			p := pruner(e)
			acq := e.acquireReq("held", "w1", leaseTTL)
			held := e.acquireWith(e.a, acq)
			e.clock.Advance(time.Second)
			renew := func(what string) (protocol.RenewRequest, protocol.Lease) {
				req := protocol.RenewRequest{Key: held.Key, Owner: held.Owner, Token: held.Token, TTL: leaseTTL, RequestID: e.rid()}
				res, err := e.a.Renew(e.ctx, req)
				e.expect(what, res, err, protocol.StatusRenewed)
				return req, *res.Lease
			}
			renew("first renew of held")
			e.clock.Advance(time.Second)
			latest, renewed := renew("second renew of held")
			ended := e.acquire(e.b, "ended", "w2", leaseTTL)
			e.release(e.b, ended)
			e.acquire(e.b, "lapsed", "w3", 2*time.Second)
			e.clock.Advance(3 * time.Second)
			trail := e.auditAll(audit.Query{Namespace: e.ns})
			if len(trail) != 6 {
				e.t.Fatalf("trail before the prune: %+v, want 6 records", trail)
			}
			res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()})
			if err != nil || res.Removed != 4 {
				e.t.Fatalf("prune up to the store's time: %+v, %v; want 4 records removed (held's first renew, ended's "+
					"acquire and release, lapsed's acquire), held's acquire and latest renew kept", res, err)
			}
			all := e.auditAll(audit.Query{})
			if len(all) != 3 || all[0].ID != trail[0].ID || all[1].ID != trail[2].ID || all[2].ID != res.Record.ID {
				e.t.Fatalf("trail after the prune: %+v; want held's acquire (id %d) and latest renew (id %d), then the "+
					"prune's record", all, trail[0].ID, trail[2].ID)
			}
			again, err := e.b.Acquire(e.ctx, acq)
			e.expectReplay("retry of held's acquire after a prune up to the store's time", again, err, protocol.StatusAcquired)
			e.expectLease("replayed acquire", again.Lease, held)
			rr, err := e.b.Renew(e.ctx, latest)
			e.expectReplay("retry of held's latest renew after a prune up to the store's time", rr, err, protocol.StatusRenewed)
			e.expectLease("replayed renew", rr.Lease, renewed)
			e.expectLease("get after the replays", e.get(e.a, "held"), renewed)
			// The renew it removed lay after the kept acquire: a follower
			// there would skip it.
			behind := audit.Query{Namespace: e.ns, Follow: true, Cursor: audit.EncodeCursor(trail[0].ID)}
			if page, err := e.audit.ReadAudit(e.ctx, behind); !errors.Is(err, audit.ErrPruned) {
				e.t.Fatalf("read from %s, the kept acquire, before the renew the prune removed: %+v, %v; want audit.ErrPruned",
					behind.Cursor, page.Records, err)
			}
			e.release(e.a, renewed)
			e.clock.Advance(time.Second)
			res, err = p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()})
			if err != nil || res.Removed != 4 {
				e.t.Fatalf("prune after held's release: %+v, %v; want its acquire, renew and release and the first "+
					"prune's record removed", res, err)
			}
			if all := e.auditAll(audit.Query{}); len(all) != 1 || all[0].ID != res.Record.ID {
				e.t.Fatalf("trail after the second prune: %+v; want its record alone", all)
			}
		}},
		{"prune_up_to_the_store_time_with_nanoseconds", func(e *env) {
			// A cut-off of the store's own time is not after it, also
			// when it has digits below the microsecond that a SQL store
			// does not keep: time.Now() taken just before the call was
			// refused when the store read its clock in the same
			// microsecond.
			// (The lease has expired by then: a prune keeps a live
			// lease's acquire, see above.)
			p := pruner(e)
			e.acquire(e.a, "k", "w1", leaseTTL)
			e.clock.Advance(leaseTTL + 69*time.Nanosecond)
			res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()})
			if err != nil || res.Removed != 1 {
				e.t.Fatalf("prune up to the store's time %s: %+v, %v; want the acquire's record removed",
					e.clock.Now().Format(time.RFC3339Nano), res, err)
			}
		}},
		{"a_follower_from_the_tail_of_an_empty_namespace_hears_a_prune", func(e *env) {
			// A follower that starts at the end of a namespace with no
			// records yet, in a trail that has others' (leasectl watch -n
			// NS, audit --follow -n NS), and whose first read comes after
			// records of that namespace were written and pruned meanwhile,
			// must not skip them silently: its read fails matching
			// audit.ErrPruned, as a follower whose cursor is behind a prune
			// does. audit.Tail answered "", the start, which no prune
			// check covers.
			p := pruner(e)
			e.ns = "other"
			e.acquire(e.a, "o", "w1", leaseTTL)
			e.ns = "fresh"
			q := audit.Query{Namespace: e.ns, Follow: true}
			cursor, err := audit.Tail(e.ctx, e.audit, q, nil)
			if err != nil {
				e.t.Fatal(err)
			}
			for _, k := range []string{"k1", "k2", "k3"} {
				e.acquire(e.a, k, "w1", leaseTTL)
			}
			e.clock.Advance(leaseTTL) // expired: a prune keeps a live lease's acquire
			if _, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()}); err != nil {
				e.t.Fatal(err)
			}
			e.acquire(e.a, "k4", "w1", leaseTTL)
			q.Cursor = cursor
			page, err := e.audit.ReadAudit(e.ctx, q)
			if !errors.Is(err, audit.ErrPruned) {
				var got []string
				for _, r := range page.Records {
					got = append(got, r.Key)
				}
				e.t.Fatalf("the follower's first read from the tail (%q) of a namespace empty when it started, after k1..k3 "+
					"were written and pruned: %v, %v; want it refused as behind a prune (audit.ErrPruned)", cursor, got, err)
			}
		}},
		{"a_follower_from_the_tail_of_an_empty_trail_hears_a_prune", func(e *env) {
			// The same on a store whose trail holds no record at all
			// (leasectl watch or audit --follow before the store's first
			// change): audit.Tail answered "", the start, from which no
			// read checks for a prune, so the records written and pruned
			// before the follower's first read were skipped without a
			// sign. The follower of the whole trail and that of a
			// namespace: their first read, and a watch from their cursor,
			// fail matching audit.ErrPruned.
			p := pruner(e)
			followers := e.followersFromAnEmptyTail()
			for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
				e.acquire(e.a, k, "w1", leaseTTL)
			}
			e.clock.Advance(leaseTTL) // expired: a prune keeps a live lease's acquire
			if res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()}); err != nil || res.Removed != 5 {
				e.t.Fatalf("prune: %+v, %v; want the acquires of k1..k5 removed", res, err)
			}
			e.acquire(e.a, "k6", "w1", leaseTTL)
			for _, q := range followers {
				page, err := e.audit.ReadAudit(e.ctx, q)
				if !errors.Is(err, audit.ErrPruned) {
					e.t.Fatalf("the first read of a follower (namespace %q) from the tail (%q) of an empty trail, after k1..k5 "+
						"were written and pruned: %v, %v; want it refused as behind a prune (audit.ErrPruned)",
						q.Namespace, q.Cursor, recordKeys(page.Records), err)
				}
				recs, errs := e.watchFor(q, 1)
				if len(recs) != 0 || len(errs) != 1 || !errors.Is(errs[0], audit.ErrPruned) {
					e.t.Fatalf("watch (namespace %q) from the tail (%q) of an empty trail, after k1..k5 were written and pruned: "+
						"records %v, errors %v; want one error matching audit.ErrPruned, then the end", q.Namespace, q.Cursor, recordKeys(recs), errs)
				}
			}
		}},
		{"a_follower_from_the_tail_of_an_empty_trail_sees_every_later_record", func(e *env) {
			// Without a prune, the follower of the whole trail and that of
			// a namespace from the tail of an empty trail see every record
			// written after, in order, and no error.
			followers := e.followersFromAnEmptyTail()
			for _, k := range []string{"k1", "k2", "k3"} {
				e.acquire(e.a, k, "w1", leaseTTL)
			}
			for _, q := range followers {
				recs, errs := e.watchFor(q, 3)
				if got := recordKeys(recs); len(errs) != 0 || strings.Join(got, ",") != "k1,k2,k3" {
					e.t.Fatalf("watch (namespace %q) from the tail (%q) of an empty trail: records %v, errors %v; want k1, k2, k3",
						q.Namespace, q.Cursor, got, errs)
				}
			}
		}},
		{"a_watch_from_the_start_reads_what_a_prune_left", func(e *env) {
			// Reading from the start (no cursor) is the ordinary way to
			// read a pruned trail: a read and a watch of the namespace,
			// and a watch of the whole trail, get what the prune left
			// (and its record), not audit.ErrPruned.
			p := pruner(e)
			for _, k := range []string{"k1", "k2"} {
				e.acquire(e.a, k, "w1", leaseTTL)
			}
			e.clock.Advance(leaseTTL) // expired: a prune keeps a live lease's acquire
			cut := e.clock.Now()
			e.acquire(e.a, "k3", "w1", leaseTTL)
			e.clock.Advance(time.Second)
			if res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()}); err != nil || res.Removed != 2 {
				e.t.Fatalf("prune: %+v, %v; want the acquires of k1 and k2 removed", res, err)
			}
			if got := recordKeys(e.readAudit(audit.Query{Namespace: e.ns}).Records); strings.Join(got, ",") != "k3" {
				e.t.Fatalf("read of the namespace from the start after the prune: %v; want k3", got)
			}
			recs, errs := e.watchFor(audit.Query{Namespace: e.ns}, 1)
			if got := recordKeys(recs); len(errs) != 0 || strings.Join(got, ",") != "k3" {
				e.t.Fatalf("watch of the namespace from the start after the prune: records %v, errors %v; want k3", got, errs)
			}
			recs, errs = e.watchFor(audit.Query{}, 2)
			if len(errs) != 0 || len(recs) != 2 || recs[0].Key != "k3" || recs[1].Op != audit.OpPrune {
				e.t.Fatalf("watch of the trail from the start after the prune: records %+v, errors %v; want k3's acquire and the prune's record", recs, errs)
			}
		}},
		{"prune_in_the_microsecond_of_a_commit_keeps_its_record", func(e *env) {
			// A cut-off in the same microsecond as the store's time, past
			// it by digits the store does not keep, is allowed (see
			// above) but is not after a record the store stamped with that
			// time: the acquire that just committed keeps its record, as
			// it does with the cut-off at the store's time, so that the
			// retry of an acquire whose answer was lost replays.
			p := pruner(e)
			e.clock.Advance(time.Second + 69*time.Nanosecond)
			req := e.acquireReq("k", "w1", leaseTTL)
			l := e.acquireWith(e.a, req)
			res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: e.clock.Now(), Actor: "ops", RequestID: e.rid()})
			if err != nil || res.Removed != 0 {
				e.t.Fatalf("prune up to %s, in the microsecond of the acquire's commit: %+v, %v; want nothing removed",
					e.clock.Now().Format(time.RFC3339Nano), res, err)
			}
			again, err := e.a.Acquire(e.ctx, req)
			e.expect("retry of the acquire after the prune", again, err, protocol.StatusAcquired)
			if !again.Replayed || again.Lease == nil || again.Lease.Token != l.Token {
				e.t.Fatalf("retry of the acquire: replayed=%v lease %v, want the replay of token %d", again.Replayed, again.Lease, l.Token)
			}
		}},
		{"a_cursor_behind_a_prune_fails", func(e *env) {
			// A follower whose cursor lies before records a prune removed
			// went on past them as if they had never been: the read, and a
			// watch from it, fail unavailable (as an etcd follower whose
			// revision was compacted), matching audit.ErrPruned and naming
			// the way on; a cursor at the last record removed, and a read
			// from the start, read what is left.
			p := pruner(e)
			l := e.acquire(e.a, "k", "w1", leaseTTL)
			first := e.readAudit(audit.Query{Namespace: e.ns})
			if len(first.Records) != 1 {
				e.t.Fatalf("trail after one acquire: %+v", first.Records)
			}
			behind := audit.Query{Namespace: e.ns, Follow: true, Cursor: audit.EncodeCursor(first.Records[0].ID)}
			e.clock.Advance(time.Second)
			e.release(e.a, l)
			e.clock.Advance(time.Second)
			cut := e.clock.Now()
			kept := e.acquire(e.b, "new", "w2", leaseTTL)
			e.clock.Advance(time.Second)
			trail := e.auditAll(audit.Query{Namespace: e.ns})
			if len(trail) != 3 {
				e.t.Fatalf("trail before the prune: %+v, want acquire, release, acquire", trail)
			}
			if res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()}); err != nil || res.Removed != 2 {
				e.t.Fatalf("prune: %+v, %v; want the acquire and release before the cut-off removed", res, err)
			}
			wantPruned := func(what string, err error) {
				e.t.Helper()
				if !errors.Is(err, audit.ErrPruned) || !errors.Is(err, protocol.ErrUnavailable) ||
					!strings.Contains(err.Error(), audit.PrunedPrefix) || !strings.Contains(err.Error(), "--since") {
					e.t.Fatalf("%s: %v; want unavailable matching audit.ErrPruned, naming the prune and --since", what, err)
				}
			}
			page, err := e.audit.ReadAudit(e.ctx, behind)
			if err == nil {
				e.t.Fatalf("read from %s, before the release a prune removed: %+v, no error", behind.Cursor, page)
			}
			wantPruned("read from "+behind.Cursor, err)
			wctx, cancel := context.WithTimeout(e.ctx, opTimeout)
			defer cancel()
			var watched []error
			for rec, err := range audit.Watch(wctx, e.audit, behind, &audit.WatchConfig{Interval: 10 * time.Millisecond}) {
				if err == nil {
					e.t.Fatalf("watch from %s yielded %+v; want only the failure", behind.Cursor, rec)
				}
				watched = append(watched, err)
			}
			if wctx.Err() != nil || len(watched) != 1 {
				e.t.Fatalf("watch from %s: %v (context: %v); want one failure, then the end", behind.Cursor, watched, wctx.Err())
			}
			wantPruned("watch from "+behind.Cursor, watched[0])
			// Not as followers: on PostgreSQL a follower's read waits for any
			// transaction of the cluster that began before the records.
			at := audit.Query{Namespace: e.ns, Cursor: audit.EncodeCursor(trail[1].ID)}
			for _, q := range []audit.Query{at, {Namespace: e.ns}} {
				got := e.readAudit(q).Records
				if len(got) != 1 || got[0].Key != "new" || got[0].Token != kept.Token {
					e.t.Fatalf("read %+v after the prune: %+v; want the acquire it kept", q, got)
				}
			}
		}},
		{"a_key_follower_goes_on_past_a_prune_of_records_it_passed", func(e *env) {
			// A follower of one key passes over the other keys' records;
			// a prune of them (and of its key's records it read) takes
			// nothing it would return, so it goes on to its key's next
			// record rather than end behind the prune. (The leases have
			// expired by the prune: it keeps a live lease's acquire.)
			p := pruner(e)
			e.acquire(e.a, "mine", "w1", 2*time.Second)
			f := e.followKey("mine")
			e.clock.Advance(time.Second)
			e.acquire(e.b, "other-1", "w2", time.Second)
			e.acquire(e.b, "other-2", "w2", time.Second)
			e.clock.Advance(time.Second)
			cut := e.clock.Now()
			e.clock.Advance(time.Second)
			f.readPast(e)
			if res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()}); err != nil || res.Removed != 3 {
				e.t.Fatalf("prune: %+v, %v; want the acquire of mine and of the two other keys removed", res, err)
			}
			mine := e.acquire(e.a, "mine", "w1", leaseTTL)
			for {
				r := f.step(e)
				if r.err != nil {
					e.t.Fatalf("follower of %q after a prune of records it passed over: %v; want its new acquire", "mine", r.err)
				}
				if len(r.page.Records) > 0 {
					break
				}
			}
			w := f.next(e)
			if w.err != nil || w.rec.Op != protocol.OpAcquire || w.rec.Key != "mine" || w.rec.Token != mine.Token {
				e.t.Fatalf("watch of %q after the prune yielded %+v, %v; want the acquire of token %d", "mine", w.rec, w.err, mine.Token)
			}
		}},
		{"a_key_follower_behind_a_pruned_record_of_its_key_fails", func(e *env) {
			// The counterpart: a prune that removed a record of the key the
			// follower had not read ends it with ErrPruned, however far it
			// read past the other keys' records; it never goes on silently.
			// (The other keys' leases have expired by the prune: it keeps
			// a live lease's acquire.)
			p := pruner(e)
			mine := e.acquire(e.a, "mine", "w1", leaseTTL)
			f := e.followKey("mine")
			e.clock.Advance(time.Second)
			e.acquire(e.b, "other-1", "w2", time.Second)
			f.readPast(e)
			e.clock.Advance(time.Second)
			e.release(e.a, mine)
			e.acquire(e.b, "other-2", "w2", time.Second)
			e.clock.Advance(time.Second)
			cut := e.clock.Now()
			e.clock.Advance(time.Second)
			if res, err := p.PruneAudit(e.ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: e.rid()}); err != nil || res.Removed != 4 {
				e.t.Fatalf("prune: %+v, %v; want both records of mine and the two other keys' removed", res, err)
			}
			r := f.step(e)
			if r.err == nil {
				e.t.Fatalf("follower of %q after a prune of its unread release: %+v, no error; want ErrPruned", "mine", r.page)
			}
			w := f.next(e)
			if w.err == nil || !errors.Is(w.err, audit.ErrPruned) || !errors.Is(w.err, protocol.ErrUnavailable) {
				e.t.Fatalf("watch of %q after a prune of its unread release yielded %+v, %v; want unavailable matching audit.ErrPruned", "mine", w.rec, w.err)
			}
			if w, ok := <-f.got; ok {
				e.t.Fatalf("watch of %q went on after ErrPruned: %+v, %v", "mine", w.rec, w.err)
			}
		}},
	}
}

// keyFollower is an audit.Watch of one key whose reads the test lets
// through one at a time (step), so that the test knows what the follower
// has read before it writes or prunes: each read waits for its turn, and
// the test receives its answer. Its records and failures arrive on got.
type keyFollower struct {
	r     audit.Reader
	turn  chan struct{}
	reads chan steppedRead
	got   chan watched
}

// steppedRead is the answer of one of a keyFollower's reads.
type steppedRead struct {
	page audit.Page
	err  error
}

// watched is one item a keyFollower's watch yielded.
type watched struct {
	rec audit.Record
	err error
}

// followKey starts a keyFollower of name after its records so far, ended
// with the test.
func (e *env) followKey(name string) *keyFollower {
	e.t.Helper()
	trail := e.auditAll(audit.Query{Namespace: e.ns, Key: name})
	if len(trail) == 0 {
		e.t.Fatalf("no record of %q to follow after", name)
	}
	f := &keyFollower{r: e.audit, turn: make(chan struct{}), reads: make(chan steppedRead), got: make(chan watched, 16)}
	ctx, cancel := context.WithCancel(e.ctx)
	q := audit.Query{Namespace: e.ns, Key: name, Cursor: audit.EncodeCursor(trail[len(trail)-1].ID)}
	go func() {
		defer close(f.got)
		// A read waits for its turn under the read's deadline: long enough
		// for any test.
		for rec, err := range audit.Watch(ctx, f, q, &audit.WatchConfig{Interval: time.Millisecond, ReadTimeout: time.Hour}) {
			select {
			case f.got <- watched{rec, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	e.t.Cleanup(func() {
		cancel()
		for range f.got {
		}
	})
	return f
}

// ReadAudit waits for the test's turn, reads, and hands the answer to the
// test.
func (f *keyFollower) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	select {
	case <-f.turn:
	case <-ctx.Done():
		return audit.Page{}, ctx.Err()
	}
	p, err := f.r.ReadAudit(ctx, q)
	select {
	case f.reads <- steppedRead{p, err}:
	case <-ctx.Done():
	}
	return p, err
}

// step lets the follower read once and returns what it read.
func (f *keyFollower) step(e *env) steppedRead {
	e.t.Helper()
	timeout := time.NewTimer(opTimeout)
	defer timeout.Stop()
	select {
	case f.turn <- struct{}{}:
	case <-timeout.C:
		e.t.Fatal("the follower did not read")
	}
	select {
	case r := <-f.reads:
		return r
	case <-timeout.C:
		e.t.Fatal("the follower's read did not answer")
	}
	return steppedRead{}
}

// readPast lets the follower read until it has read everything committed
// before the call (on PostgreSQL, once no transaction of the cluster holds
// records back), expecting no record of its key.
func (f *keyFollower) readPast(e *env) {
	e.t.Helper()
	for {
		r := f.step(e)
		if r.err != nil || len(r.page.Records) != 0 {
			e.t.Fatalf("follower's read: %+v, %v; want no record of its key", r.page.Records, r.err)
		}
		if !r.page.HeldBack {
			return
		}
	}
}

// next returns the next item the follower's watch yielded.
func (f *keyFollower) next(e *env) watched {
	e.t.Helper()
	timeout := time.NewTimer(opTimeout)
	defer timeout.Stop()
	select {
	case w, ok := <-f.got:
		if !ok {
			e.t.Fatal("the follower's watch ended")
		}
		return w
	case <-timeout.C:
		e.t.Fatal("the follower's watch yielded nothing")
	}
	return watched{}
}

// followersFromAnEmptyTail checks that the store's trail is empty and
// returns two followers, of the whole trail and of e's namespace, each
// from audit.Tail's cursor.
func (e *env) followersFromAnEmptyTail() []audit.Query {
	if n := e.auditCount(); n != 0 {
		e.t.Fatalf("a new store's trail holds %d records; want none", n)
	}
	followers := []audit.Query{{Follow: true}, {Namespace: e.ns, Follow: true}}
	for i, q := range followers {
		cursor, err := audit.Tail(e.ctx, e.audit, q, nil)
		if err != nil {
			e.t.Fatalf("tail of %+v: %v", q, err)
		}
		followers[i].Cursor = cursor
	}
	return followers
}

// watchFor watches q with audit.Watch until it yielded n records or ended
// (as it does after an error matching audit.ErrPruned), and returns what
// it yielded. A read held back on PostgreSQL (a transaction of
// the shared cluster in progress) waits: the deadline is two minutes.
func (e *env) watchFor(q audit.Query, n int) ([]audit.Record, []error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	var (
		recs []audit.Record
		errs []error
	)
	for rec, err := range audit.Watch(ctx, e.audit, q, &audit.WatchConfig{Interval: 10 * time.Millisecond}) {
		if err != nil {
			errs = append(errs, err) // ErrPruned and closed end the watch
			continue
		}
		if recs = append(recs, rec); len(recs) == n {
			break
		}
	}
	if ctx.Err() != nil {
		e.t.Fatalf("watch %+v: no end within 2 minutes; yielded records %v, errors %v", q, recordKeys(recs), errs)
	}
	return recs, errs
}

// recordKeys returns the key names of recs, in order.
func recordKeys(recs []audit.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}
