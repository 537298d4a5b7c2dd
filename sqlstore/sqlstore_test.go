package sqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore"
)

func TestCheckVersions(t *testing.T) {
	if err := sqlstore.CheckLeaseVersion(protocol.OpGet, protocol.LeaseFormatVersion); err != nil {
		t.Fatalf("current lease version refused: %v", err)
	}
	if err := sqlstore.CheckRecordVersion(protocol.OpAcquire, audit.RecordFormatVersion); err != nil {
		t.Fatalf("current record version refused: %v", err)
	}
	for _, c := range []struct {
		err   error
		op    protocol.Op
		parts []string
	}{
		{sqlstore.CheckLeaseVersion(protocol.OpGet, 2), protocol.OpGet, []string{"leasestore_leases", "version 2", "version 1"}},
		{sqlstore.CheckLeaseVersion(protocol.OpList, 0), protocol.OpList, []string{"leasestore_leases", "version 0"}},
		{sqlstore.CheckRecordVersion(protocol.OpRenew, 9), protocol.OpRenew, []string{"leasestore_audit", "version 9", "version 1"}},
	} {
		var pe *protocol.Error
		if !errors.As(c.err, &pe) || pe.Status != protocol.StatusUnavailable || pe.Op != c.op || !errors.Is(c.err, protocol.ErrUnavailable) {
			t.Fatalf("err = %#v, want an unavailable *protocol.Error for %s", c.err, c.op)
		}
		for _, p := range c.parts {
			if !strings.Contains(c.err.Error(), p) {
				t.Errorf("err %q does not mention %q", c.err, p)
			}
		}
	}
}

func TestSchemaVersionError(t *testing.T) {
	for _, c := range []struct {
		found int64
		parts []string
	}{
		{0, []string{"db \"x\"", "no leasestore schema", "leasectl migrate up", "migrations.Up"}},
		{1, []string{"version 1", "needs 3", "leasectl migrate up", "migrations.Up"}},
		{4, []string{"version 4", "newer", "upgrade leasestore"}},
	} {
		err := sqlstore.SchemaVersionError(c.found, 3, `db "x"`)
		if err.Status != protocol.StatusUnavailable || !errors.Is(err, protocol.ErrUnavailable) {
			t.Fatalf("found %d: status %s, want unavailable", c.found, err.Status)
		}
		for _, p := range c.parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("found %d: %q does not mention %q", c.found, err, p)
			}
		}
	}
}

var (
	at  = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	exp = at.Add(time.Minute)
	k   = protocol.Key{Namespace: "ns", Name: "job"}
)

func TestNewRecorded(t *testing.T) {
	l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at.Add(-time.Hour), RenewedAt: at, ExpiresAt: exp, Version: 1}
	r := sqlstore.NewRecorded(at, protocol.OpRenew, protocol.StatusRenewed, l, "rid", "fp", "w1", "")
	want := sqlstore.Recorded{Record: audit.Record{At: at, Op: protocol.OpRenew, Namespace: "ns", Key: "job", Owner: "w1",
		Token: 7, RequestID: "rid", Actor: "w1", Status: protocol.StatusRenewed, Version: audit.RecordFormatVersion, ExpiresAt: exp},
		ParamsHash: "fp", AcquiredAt: l.AcquiredAt, RenewedAt: l.RenewedAt}
	if r != want {
		t.Fatalf("renew record = %+v, want %+v", r, want)
	}
	r = sqlstore.NewRecorded(at, protocol.OpRevoke, protocol.StatusRevoked, l, "rid", "fp", "operator", "stuck")
	if !r.ExpiresAt.Equal(exp) || r.Actor != "operator" || r.Reason != "stuck" || r.Owner != "w1" {
		t.Fatalf("revoke record = %+v, want the lease's expiry, the operator as actor, the lease's owner as owner", r)
	}
}

func TestReplay(t *testing.T) {
	acq := protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "rid"}
	l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at, RenewedAt: at, ExpiresAt: exp, Version: 1}
	rec := sqlstore.NewRecorded(at, protocol.OpAcquire, protocol.StatusAcquired, l, "rid", acq.Fingerprint(), "w1", "")

	res, err := sqlstore.Replay(rec, protocol.OpAcquire, acq.Fingerprint())
	if err != nil || res.Status != protocol.StatusAcquired || !res.Replayed || res.Lease == nil || *res.Lease != l {
		t.Fatalf("replay of acquire = %+v (lease %+v), %v; want acquired, replayed, lease %+v", res, res.Lease, err, l)
	}

	// Every operation's replay answers the whole lease as first answered.
	held := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at.Add(-time.Hour), RenewedAt: at.Add(-time.Minute),
		ExpiresAt: exp, Version: 1}
	ren := protocol.RenewRequest{Key: k, Owner: "w1", Token: 7, TTL: time.Minute, RequestID: "rid2"}
	rel := protocol.ReleaseRequest{Key: k, Owner: "w1", Token: 7, RequestID: "rid3"}
	for _, c := range []struct {
		op protocol.Op
		st protocol.Status
		fp string
	}{{protocol.OpRenew, protocol.StatusRenewed, ren.Fingerprint()}, {protocol.OpRelease, protocol.StatusReleased, rel.Fingerprint()}} {
		rr := sqlstore.NewRecorded(at, c.op, c.st, held, "rid2", c.fp, "w1", "")
		res, err = sqlstore.Replay(rr, c.op, c.fp)
		if err != nil || !res.Replayed || res.Status != c.st || *res.Lease != held {
			t.Fatalf("replay of %s = %+v (lease %+v), %v; want lease %+v", c.op, res, res.Lease, err, held)
		}
	}

	// A record written before schema version 2 lacks acquired_at and
	// renewed_at: a renew's replay has no acquired_at to give.
	rr := sqlstore.NewRecorded(at, protocol.OpRenew, protocol.StatusRenewed, l, "rid2", ren.Fingerprint(), "w1", "")
	rr.AcquiredAt, rr.RenewedAt = time.Time{}, time.Time{}
	res, err = sqlstore.Replay(rr, protocol.OpRenew, ren.Fingerprint())
	if err != nil || !res.Replayed || !res.Lease.AcquiredAt.IsZero() || !res.Lease.RenewedAt.Equal(at) || !res.Lease.ExpiresAt.Equal(exp) {
		t.Fatalf("replay of a version 1 renew = %+v (lease %+v), %v", res, res.Lease, err)
	}

	// The same id with other parameters, or for another operation, is invalid.
	other := acq
	other.TTL = 2 * time.Minute
	for _, c := range []struct {
		op protocol.Op
		fp string
	}{{protocol.OpAcquire, other.Fingerprint()}, {protocol.OpRenew, acq.Fingerprint()}} {
		res, err := sqlstore.Replay(rec, c.op, c.fp)
		if err != nil || res.Status != protocol.StatusInvalid || res.Replayed || res.Lease != nil || !strings.Contains(res.Message, "rid") {
			t.Fatalf("replay as %s with fingerprint %.8s = %+v, %v; want invalid naming the request id", c.op, c.fp, res, err)
		}
	}

	// A record of an unknown version is refused, not replayed.
	rec.Version = 2
	if _, err := sqlstore.Replay(rec, protocol.OpAcquire, acq.Fingerprint()); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("replay of a version 2 record: %v, want unavailable", err)
	}
}

func TestLeasePage(t *testing.T) {
	rows := func(names ...string) []protocol.Lease {
		var ls []protocol.Lease
		for _, n := range names {
			ls = append(ls, protocol.Lease{Key: protocol.Key{Namespace: "ns", Name: n}})
		}
		return ls
	}
	p := sqlstore.LeasePage(nil, 2)
	if p.Status != protocol.StatusFound || p.Leases == nil || len(p.Leases) != 0 || p.NextCursor != "" {
		t.Fatalf("empty page = %+v, want found, an empty non-nil slice, no cursor", p)
	}
	p = sqlstore.LeasePage(rows("a", "b"), 2)
	if len(p.Leases) != 2 || p.NextCursor != "" {
		t.Fatalf("full last page = %+v, want 2 leases and no cursor", p)
	}
	p = sqlstore.LeasePage(rows("a", "b", "c"), 2)
	if len(p.Leases) != 2 || p.Leases[1].Key.Name != "b" {
		t.Fatalf("page with more = %+v, want a and b", p)
	}
	if name, err := protocol.DecodeListCursor(p.NextCursor); err != nil || name != "b" {
		t.Fatalf("cursor decodes to %q, %v; want b", name, err)
	}
}

func TestAuditPage(t *testing.T) {
	p := sqlstore.AuditPage(nil, 1)
	if p.Records == nil || len(p.Records) != 0 || p.NextCursor != "" {
		t.Fatalf("empty page = %+v", p)
	}
	p = sqlstore.AuditPage([]audit.Record{{ID: 4}, {ID: 9}}, 1)
	if len(p.Records) != 1 || p.Records[0].ID != 4 {
		t.Fatalf("page = %+v, want record 4", p)
	}
	if id, err := audit.DecodeCursor(p.NextCursor); err != nil || id != 4 {
		t.Fatalf("cursor decodes to %d, %v; want 4", id, err)
	}
}
