package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// expectAuditOps checks the operations of namespace ns's audit trail, oldest first.
func (e *env) expectAuditOps(ns string, ops ...protocol.Op) {
	e.t.Helper()
	var got []protocol.Op
	for _, r := range e.auditAll(audit.Query{Namespace: ns}) {
		if r.Namespace != ns {
			e.t.Fatalf("audit of %s returned a record of %s", ns, r.Namespace)
		}
		got = append(got, r.Op)
	}
	if !slices.Equal(got, ops) {
		e.t.Fatalf("audit of %s: operations %q, want %q", ns, got, ops)
	}
}

// expectRecord checks every field of an audit record but its id.
func (e *env) expectRecord(what string, got, want audit.Record) {
	e.t.Helper()
	if got.Op != want.Op || got.Namespace != want.Namespace || got.Key != want.Key || got.Owner != want.Owner ||
		got.Token != want.Token || got.RequestID != want.RequestID || got.Actor != want.Actor ||
		got.Reason != want.Reason || got.Status != want.Status || got.Version != want.Version ||
		!sameInstant(got.At, want.At) || !sameInstant(got.ExpiresAt, want.ExpiresAt) ||
		got.ExpiresAt.IsZero() != want.ExpiresAt.IsZero() {
		e.t.Fatalf("%s: record\n%+v\nwant\n%+v", what, got, want)
	}
}

// readPages reads every page of q (its Limit a page), checking each page
// against the limit and each cursor against the last record it follows
// (q.NextCursor), and returns the ids in the order read. More than 11
// pages fails the test.
func (e *env) readPages(q audit.Query) []int64 {
	var got []int64
	for page := 0; ; page++ {
		p := e.readAudit(q)
		if q.Limit > 0 && len(p.Records) > q.Limit {
			e.t.Fatalf("audit %+v: %d records in a page", q, len(p.Records))
		}
		if page > 10 {
			e.t.Fatalf("audit %+v: too many pages", q)
		}
		got = append(got, recordIDs(p.Records)...)
		if p.NextCursor == "" {
			return got
		}
		if len(p.Records) == 0 {
			e.t.Fatalf("audit %+v: an empty page with next cursor %q", q, p.NextCursor)
		}
		if want := q.NextCursor(p.Records[len(p.Records)-1].ID); p.NextCursor != want {
			e.t.Fatalf("audit %+v: next cursor %q, want %q", q, p.NextCursor, want)
		}
		q.Cursor = p.NextCursor
	}
}

// recordIDs returns the ids of records.
func recordIDs(rs []audit.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func auditCases() []testCase {
	return []testCase{
		{"one_record_per_state_change", func(e *env) {
			var want []audit.Record
			rec := func(op protocol.Op, st protocol.Status, l protocol.Lease, rid, actor, reason string, expires time.Time) {
				want = append(want, audit.Record{At: e.clock.Now(), Op: op, Namespace: e.ns, Key: l.Key.Name, Owner: l.Owner,
					Token: l.Token, RequestID: rid, Actor: actor, Reason: reason, Status: st,
					Version: audit.RecordFormatVersion, ExpiresAt: expires})
			}
			acq := e.acquireReq("job", "w1", leaseTTL)
			l1 := e.acquireWith(e.a, acq)
			rec(protocol.OpAcquire, protocol.StatusAcquired, l1, acq.RequestID, "w1", "", l1.ExpiresAt)

			res, err := e.b.Acquire(e.ctx, e.acquireReq("job", "w2", leaseTTL))
			e.expect("conflicting acquire", res, err, protocol.StatusConflict)

			e.clock.Advance(time.Second)
			ren := protocol.RenewRequest{Key: l1.Key, Owner: "w1", Token: l1.Token, TTL: renewTTL, RequestID: e.rid()}
			res, err = e.b.Renew(e.ctx, ren)
			e.expect("renew", res, err, protocol.StatusRenewed)
			renewedExpiry := e.clock.Now().Add(renewTTL)
			rec(protocol.OpRenew, protocol.StatusRenewed, l1, ren.RequestID, "w1", "", renewedExpiry)

			res, err = e.a.Renew(e.ctx, protocol.RenewRequest{Key: l1.Key, Owner: "w2", Token: l1.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("renew by another owner", res, err, protocol.StatusNotOwner)

			e.clock.Advance(time.Second)
			rel := protocol.ReleaseRequest{Key: l1.Key, Owner: "w1", Token: l1.Token, RequestID: e.rid()}
			res, err = e.a.Release(e.ctx, rel)
			e.expect("release", res, err, protocol.StatusReleased)
			rec(protocol.OpRelease, protocol.StatusReleased, l1, rel.RequestID, "w1", "", renewedExpiry)

			res, err = e.a.Release(e.ctx, protocol.ReleaseRequest{Key: l1.Key, Owner: "w1", Token: l1.Token, RequestID: e.rid()})
			e.expect("second release", res, err, protocol.StatusNotFound)

			e.clock.Advance(time.Second)
			acq = e.acquireReq("job", "w2", leaseTTL)
			l2 := e.acquireWith(e.b, acq)
			rec(protocol.OpAcquire, protocol.StatusAcquired, l2, acq.RequestID, "w2", "", l2.ExpiresAt)

			e.clock.Advance(time.Second)
			rev := protocol.RevokeRequest{Key: l2.Key, Actor: "ops@host", Reason: "stuck worker", RequestID: e.rid()}
			res, err = e.a.Revoke(e.ctx, rev)
			e.expect("revoke", res, err, protocol.StatusRevoked)
			rec(protocol.OpRevoke, protocol.StatusRevoked, l2, rev.RequestID, "ops@host", "stuck worker", l2.ExpiresAt)

			res, err = e.b.Revoke(e.ctx, protocol.RevokeRequest{Key: l2.Key, Actor: "ops@host", Reason: "again", RequestID: e.rid()})
			e.expect("second revoke", res, err, protocol.StatusNotFound)

			got := e.auditAll(audit.Query{Namespace: e.ns})
			if len(got) != len(want) {
				e.t.Fatalf("%d audit records, want %d: %+v", len(got), len(want), got)
			}
			for i := range got {
				if i > 0 && got[i].ID <= got[i-1].ID {
					e.t.Fatalf("record ids not increasing: %d", recordIDs(got))
				}
				e.expectRecord(fmt.Sprintf("record %d (%s)", i+1, want[i].Op), got[i], want[i])
			}
		}},
		{"filters_and_pagination", func(e *env) {
			t0 := e.clock.Now()
			at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
			e.ns = "ns-a"
			k1 := e.acquire(e.a, "k1", "w1", leaseTTL) // t0
			e.clock.Advance(time.Second)
			k2 := e.acquire(e.b, "k2", "w1", leaseTTL) // t0+1s
			e.clock.Advance(time.Second)
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: k1.Key, Owner: "w1", Token: k1.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("renew", res, err, protocol.StatusRenewed) // t0+2s
			e.clock.Advance(time.Second)
			e.ns = "ns-b"
			e.acquire(e.a, "k1", "w1", leaseTTL) // t0+3s
			e.clock.Advance(time.Second)
			e.release(e.b, k2) // t0+4s
			e.clock.Advance(time.Second)

			all := e.auditAll(audit.Query{})
			if len(all) != 5 {
				e.t.Fatalf("%d records in all namespaces, want 5", len(all))
			}
			for i, r := range all {
				if !sameInstant(r.At, at(i)) {
					e.t.Fatalf("record %d at %v, want %v", i+1, r.At, at(i))
				}
				if i > 0 && r.ID <= all[i-1].ID {
					e.t.Fatalf("record ids not increasing: %d", recordIDs(all))
				}
			}
			id := func(is ...int) []int64 {
				out := []int64{}
				for _, i := range is {
					out = append(out, all[i].ID)
				}
				return out
			}
			for _, c := range []struct {
				q    audit.Query
				want []int64
			}{
				{audit.Query{Namespace: "ns-a"}, id(0, 1, 2, 4)},
				{audit.Query{Namespace: "ns-b"}, id(3)},
				{audit.Query{Namespace: "ns-c"}, id()},
				{audit.Query{Namespace: "ns-a", Key: "k1"}, id(0, 2)},
				{audit.Query{Namespace: "ns-a", Key: "k2"}, id(1, 4)},
				{audit.Query{Namespace: "ns-b", Key: "k1"}, id(3)},
				{audit.Query{Namespace: "ns-a", Key: "k"}, id()},
				{audit.Query{Since: at(2)}, id(2, 3, 4)}, // since is inclusive
				{audit.Query{Since: at(2).Add(time.Microsecond)}, id(3, 4)},
				{audit.Query{Since: at(2).Add(time.Nanosecond)}, id(3, 4)}, // at(2) is before it, at every precision
				{audit.Query{Namespace: "ns-a", Since: at(2)}, id(2, 4)},
				{audit.Query{Namespace: "ns-a", Key: "k1", Since: at(1)}, id(2)},
				{audit.Query{Since: at(5)}, id()},
				{audit.Query{Cursor: audit.EncodeCursor(all[1].ID)}, id(2, 3, 4)},
				{audit.Query{Namespace: "ns-a", Cursor: audit.EncodeCursor(all[2].ID)}, id(4)},
			} {
				for _, limit := range []int{0, 1, 2, 3, 5, audit.MaxLimit} {
					q := c.q
					q.Limit = limit
					if got := e.readPages(q); !slices.Equal(got, c.want) {
						e.t.Fatalf("audit %+v limit %d: ids %d, want %d", c.q, limit, got, c.want)
					}
				}
			}
			// Exact fit: a page of exactly Limit records is the last one.
			if p := e.readAudit(audit.Query{Limit: 5}); len(p.Records) != 5 || p.NextCursor != "" {
				e.t.Fatalf("audit limit 5: %d records, cursor %q; want 5 and none", len(p.Records), p.NextCursor)
			}
			// A follower keeps the last record's cursor and sees new records.
			e.acquire(e.a, "k3", "w1", leaseTTL)
			p := e.readAudit(audit.Query{Cursor: audit.EncodeCursor(all[4].ID)})
			if len(p.Records) != 1 || p.Records[0].Key != "k3" || p.Records[0].ID <= all[4].ID || p.NextCursor != "" {
				e.t.Fatalf("follow after the last record: %+v", p)
			}
		}},
		{"op_owner_and_newest_first", func(e *env) {
			t0 := e.clock.Now()
			e.ns = "ns-a"
			step := func() { e.clock.Advance(time.Second) }
			k1 := e.acquire(e.a, "k1", "w1", leaseTTL) // 0 acquire k1 w1
			step()
			e.acquire(e.b, "k2", "w2", leaseTTL) // 1 acquire k2 w2
			step()
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: k1.Key, Owner: "w1", Token: k1.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("renew", res, err, protocol.StatusRenewed) // 2 renew k1 w1
			step()
			e.release(e.a, *res.Lease) // 3 release k1 w1
			step()
			e.acquire(e.b, "k1", "w2", leaseTTL) // 4 acquire k1 w2
			step()
			e.revoke(e.a, "k2") // 5 revoke k2 w2 (actor operator)
			step()
			e.ns = "ns-b"
			e.acquire(e.a, "k1", "w1", leaseTTL) // 6 acquire ns-b/k1 w1
			step()
			e.acquire(e.b, "k2", "w1w", leaseTTL) // 7 an owner w1 is a prefix of
			step()

			all := e.auditAll(audit.Query{})
			if len(all) != 8 {
				e.t.Fatalf("%d records in all namespaces, want 8", len(all))
			}
			id := func(is ...int) []int64 {
				out := []int64{}
				for _, i := range is {
					out = append(out, all[i].ID)
				}
				return out
			}
			ops := func(o ...protocol.Op) []protocol.Op { return o }
			for _, c := range []struct {
				q    audit.Query
				want []int64
			}{
				{audit.Query{Ops: ops(protocol.OpAcquire)}, id(0, 1, 4, 6, 7)},
				{audit.Query{Ops: ops(protocol.OpRenew, protocol.OpRelease)}, id(2, 3)},
				{audit.Query{Ops: ops(protocol.OpRelease, protocol.OpRenew)}, id(2, 3)}, // the order of ops does not matter
				{audit.Query{Ops: ops(protocol.OpRevoke)}, id(5)},
				{audit.Query{Ops: ops(audit.OpPrune)}, id()},
				{audit.Query{Owner: "w1"}, id(0, 2, 3, 6)}, // exact: not w1w
				{audit.Query{Owner: "w2"}, id(1, 4, 5)},    // a revoke's record carries the revoked owner
				{audit.Query{Owner: "operator"}, id()},     // the owner, not the actor
				{audit.Query{Owner: "w"}, id()},
				{audit.Query{Ops: ops(protocol.OpAcquire), Owner: "w1"}, id(0, 6)},
				{audit.Query{Ops: ops(protocol.OpAcquire, protocol.OpRevoke), Owner: "w2"}, id(1, 4, 5)},
				{audit.Query{Namespace: "ns-a", Ops: ops(protocol.OpAcquire), Owner: "w1"}, id(0)},
				{audit.Query{Namespace: "ns-a", Key: "k1", Ops: ops(protocol.OpAcquire)}, id(0, 4)},
				{audit.Query{Namespace: "ns-a", Key: "k1", Owner: "w1"}, id(0, 2, 3)},
				{audit.Query{Ops: ops(protocol.OpAcquire), Since: t0.Add(2 * time.Second)}, id(4, 6, 7)},
				{audit.Query{}, id(0, 1, 2, 3, 4, 5, 6, 7)},
				{audit.Query{Namespace: "ns-b"}, id(6, 7)},
				{audit.Query{Since: t0.Add(5 * time.Second)}, id(5, 6, 7)},
				{audit.Query{Namespace: "ns-a", Key: "k2", Since: t0.Add(time.Second)}, id(1, 5)},
			} {
				for _, newest := range []bool{false, true} {
					want := slices.Clone(c.want)
					if newest {
						slices.Reverse(want)
					}
					for _, limit := range []int{0, 1, 2, 3, audit.MaxLimit} {
						q := c.q
						q.Limit, q.Newest = limit, newest
						if got := e.readPages(q); !slices.Equal(got, want) {
							e.t.Fatalf("audit %+v (newest first: %t) limit %d: ids %d, want %d", c.q, newest, limit, got, want)
						}
					}
				}
			}
			// Newest first from a cursor goes on to older records; a
			// newest-first cursor of the newest record sees records
			// written after it only in a new read from the top.
			if p := e.readAudit(audit.Query{Newest: true, Cursor: audit.EncodeNewestCursor(all[3].ID)}); !slices.Equal(recordIDs(p.Records), id(2, 1, 0)) || p.NextCursor != "" {
				e.t.Fatalf("newest first before record 4: %d, cursor %q; want %d and none", recordIDs(p.Records), p.NextCursor, id(2, 1, 0))
			}
			if p := e.readAudit(audit.Query{Newest: true, Cursor: audit.EncodeNewestCursor(all[0].ID)}); len(p.Records) != 0 || p.NextCursor != "" {
				e.t.Fatalf("newest first before the first record: %+v, want no records", p)
			}
			// A cursor is read in the order it was made for; anything else
			// is invalid and reads nothing.
			for _, q := range []audit.Query{
				{Newest: true, Cursor: audit.EncodeCursor(all[3].ID)},
				{Cursor: audit.EncodeNewestCursor(all[3].ID)},
				{Newest: true, Follow: true},
				{Ops: ops("expire")},
				{Ops: ops("acquire,renew")},
				{Ops: ops("")},
				{Ops: ops(protocol.OpAcquire, protocol.OpAcquire)},
				{Owner: "bad\x00owner"},
			} {
				p, err := e.audit.ReadAudit(e.ctx, q)
				if err == nil || len(p.Records) != 0 {
					e.t.Fatalf("audit %+v: %d records, error %v; want an error and none", q, len(p.Records), err)
				}
				if !errors.Is(err, protocol.ErrInvalid) {
					e.t.Fatalf("audit %+v: error %v, want status invalid", q, err)
				}
			}
			_, err = e.audit.ReadAudit(e.ctx, audit.Query{Ops: ops(protocol.OpAcquire, "expire")})
			if err == nil || !strings.Contains(err.Error(), `"expire" is not an operation the audit trail records (acquire,renew,release,revoke,prune)`) {
				e.t.Fatalf("audit of op expire: error %v, want one naming the ops the trail records", err)
			}
		}},
		{"cursor_past_the_end", func(e *env) {
			// A cursor with an id no record of this store has reached (made
			// by another store) is refused as invalid, naming why: a
			// follower from it would skip every record until the trail
			// caught up. Every position the store issued stays valid,
			// the end of the trail included.
			e.acquire(e.a, "k1", "w1", leaseTTL)
			e.acquire(e.a, "k2", "w1", leaseTTL)
			end, err := audit.Tail(e.ctx, e.audit, audit.Query{}, nil)
			if err != nil {
				e.t.Fatalf("tail: %v", err)
			}
			recs := e.auditAll(audit.Query{})
			last := recs[len(recs)-1].ID
			issued := []string{end, audit.EncodeCursor(last)}
			page := e.readAudit(audit.Query{Follow: true, Namespace: e.ns, Key: "k1"})
			issued = append(issued, page.FollowCursor, page.NextCursor)
			for _, c := range issued {
				if c == "" {
					continue
				}
				for _, q := range []audit.Query{{Cursor: c}, {Cursor: c, Follow: true}, {Cursor: c, Follow: true, Namespace: e.ns, Key: "k1"}} {
					if _, err := e.audit.ReadAudit(e.ctx, q); err != nil {
						e.t.Fatalf("audit %+v from a cursor this store issued: %v", q, err)
					}
				}
			}
			past := audit.EncodeCursor(last + 1<<40)
			for _, q := range []audit.Query{{Cursor: past}, {Cursor: past, Follow: true}, {Cursor: past, Follow: true, Namespace: e.ns, Key: "k1"}} {
				p, err := e.audit.ReadAudit(e.ctx, q)
				if protocol.StatusOf(err) != protocol.StatusInvalid || !strings.Contains(err.Error(), "past the end of this store's audit trail") ||
					len(p.Records) != 0 {
					e.t.Fatalf("audit %+v, a cursor past the end: %d records, error %v; want invalid, naming the end of the trail", q, len(p.Records), err)
				}
			}
			// A watch from it ends with that answer, yielded once.
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			defer cancel()
			var errs []error
			for _, err := range audit.Watch(ctx, e.audit, audit.Query{Namespace: e.ns, Cursor: past}, &audit.WatchConfig{Interval: 10 * time.Millisecond}) {
				if err == nil {
					e.t.Fatalf("watch from a cursor past the end yielded a record")
				}
				errs = append(errs, err)
			}
			if ctx.Err() != nil || len(errs) != 1 || protocol.StatusOf(errs[0]) != protocol.StatusInvalid {
				e.t.Fatalf("watch from a cursor past the end: %v (context %v); want one invalid answer, then the end", errs, ctx.Err())
			}
		}},
		{"invalid_query", func(e *env) {
			e.acquire(e.a, "k1", "w1", leaseTTL)
			for _, q := range []audit.Query{
				{Key: "k1"}, // a key needs a namespace
				{Cursor: "bogus"},
				{Cursor: backendkit.EncodeListCursor("k1")},
				{Limit: -1},
				{Limit: audit.MaxLimit + 1},
				{Namespace: "bad\x00ns"},
			} {
				p, err := e.audit.ReadAudit(e.ctx, q)
				if err == nil {
					e.t.Fatalf("audit %+v: no error, %d records", q, len(p.Records))
				}
				if len(p.Records) != 0 {
					e.t.Fatalf("audit %+v: error %v with %d records", q, err, len(p.Records))
				}
			}
		}},
	}
}
