package sqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
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

// sqlstore.Replay refuses a record of an unknown format version before it
// replays it.
func TestReplayRefusesUnknownVersions(t *testing.T) {
	acq := protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "rid"}
	l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at, RenewedAt: at, ExpiresAt: exp, Version: 1}
	rec := backendkit.NewRecorded(at, protocol.OpAcquire, protocol.StatusAcquired, l, "rid", backendkit.Fingerprint(acq), "w1", "")
	if res, err := sqlstore.Replay(rec, protocol.OpAcquire, backendkit.Fingerprint(acq)); err != nil || !res.Replayed {
		t.Fatalf("replay of a current record: %+v, %v", res, err)
	}
	rec.Version = audit.RecordFormatVersion + 1
	if _, err := sqlstore.Replay(rec, protocol.OpAcquire, backendkit.Fingerprint(acq)); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("replay of a record of version %d: %v, want unavailable", rec.Version, err)
	}
}
