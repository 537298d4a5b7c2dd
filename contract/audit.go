package contract

import (
	"fmt"
	"slices"
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
				{audit.Query{Namespace: "ns-a", Since: at(2)}, id(2, 4)},
				{audit.Query{Namespace: "ns-a", Key: "k1", Since: at(1)}, id(2)},
				{audit.Query{Since: at(5)}, id()},
				{audit.Query{Cursor: audit.EncodeCursor(all[1].ID)}, id(2, 3, 4)},
				{audit.Query{Namespace: "ns-a", Cursor: audit.EncodeCursor(all[2].ID)}, id(4)},
			} {
				for _, limit := range []int{0, 1, 2, 3, 5, audit.MaxLimit} {
					q := c.q
					q.Limit = limit
					var got []int64
					for page := 0; ; page++ {
						p := e.readAudit(q)
						if limit > 0 && len(p.Records) > limit {
							e.t.Fatalf("audit %+v: %d records in a page", q, len(p.Records))
						}
						if page > 10 {
							e.t.Fatalf("audit %+v: too many pages", c.q)
						}
						got = append(got, recordIDs(p.Records)...)
						if p.NextCursor == "" {
							break
						}
						if len(p.Records) == 0 {
							e.t.Fatalf("audit %+v: an empty page with next cursor %q", q, p.NextCursor)
						}
						if want := audit.EncodeCursor(p.Records[len(p.Records)-1].ID); p.NextCursor != want {
							e.t.Fatalf("audit %+v: next cursor %q, want %q", q, p.NextCursor, want)
						}
						q.Cursor = p.NextCursor
					}
					if !slices.Equal(got, c.want) {
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
