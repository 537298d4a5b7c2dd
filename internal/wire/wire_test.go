package wire_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// A record of a format version this release does not know is refused
// naming both versions and the fix, as the backends refuse such a row: a
// client of a newer server must not read it as a version it knows.
func TestRecordOfAnotherFormatVersionIsRefused(t *testing.T) {
	t.Parallel()
	good := wire.Record{ID: 1, At: "2026-01-02T15:04:05.000001Z", Op: "acquire", Namespace: "ns", Key: "k", Owner: "o",
		Token: 7, RequestID: "r", Actor: "o", Status: "acquired", Version: audit.RecordFormatVersion}
	if _, err := good.Audit(); err != nil {
		t.Fatalf("a record of this release's version: %v", err)
	}
	for _, v := range []int{0, audit.RecordFormatVersion + 1} {
		r := good
		r.Version = v
		_, err := r.Audit()
		if err == nil || !strings.Contains(err.Error(), "upgrade") {
			t.Errorf("record of format version %d: err %v, want a refusal naming both versions and the fix", v, err)
		}
	}
	for _, id := range []int64{0, -1} {
		r := good
		r.ID = id
		if _, err := r.Audit(); err == nil {
			t.Errorf("record id %d: accepted, want an error (ids start at 1, and a cursor after it is invalid)", id)
		}
	}
}

// Tokens and ids beyond 2^53 (where a float64 loses integers) round-trip
// exactly through the JSON shapes.
func TestLargeIntegersRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	rec := audit.Record{ID: math.MaxInt64, At: at, Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "o",
		Token: 1<<53 + 1, RequestID: "r", Actor: "o", Status: protocol.StatusAcquired, Version: audit.RecordFormatVersion}
	b, err := json.Marshal(wire.FromPage(audit.Page{Records: []audit.Record{rec}}))
	if err != nil {
		t.Fatal(err)
	}
	var p wire.AuditPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	got, err := p.Audit()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 1 || !reflect.DeepEqual(got.Records[0], rec) {
		t.Fatalf("round trip of %+v through %s: %+v", rec, b, got.Records)
	}
}

// FuzzAuditPage: whatever a server sends as an audit page either fails to
// decode or decodes to records that this release can read (its format
// version, a positive id) and that encode back to the same page, at the
// shapes' microsecond precision.
func FuzzAuditPage(f *testing.F) {
	f.Add([]byte(`{"status":"found","records":[{"id":1,"at":"2026-01-02T15:04:05.000001Z","op":"acquire","namespace":"ns","key":"k","owner":"o","token":9007199254740993,"request_id":"r","actor":"o","reason":"","status":"acquired","version":1,"expires_at":"2026-01-02T15:05:05Z"}],"next_cursor":"a1.1","held_back":true}`))
	f.Add([]byte(`{"status":"found","records":[{"id":2,"at":"2026-01-02T15:04:05.123456789+02:00","op":"prune","version":1}],"next_cursor":""}`))
	f.Add([]byte(`{"status":"found","records":[{"id":3,"at":"2026-01-02T15:04:05Z","op":"release","version":2}]}`))
	f.Add([]byte(`{"records":[{"id":-4,"at":"0000-01-01T00:00:00Z","version":1}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var p wire.AuditPage
		if json.Unmarshal(body, &p) != nil {
			return
		}
		page, err := p.Audit()
		if err != nil {
			return
		}
		for _, r := range page.Records {
			if r.Version != audit.RecordFormatVersion || r.ID <= 0 {
				t.Fatalf("decoded a record this release cannot read: %+v", r)
			}
		}
		again, err := wire.FromPage(page).Audit()
		if err != nil {
			t.Fatalf("a decoded page does not decode again: %v", err)
		}
		for i, r := range page.Records {
			r.At, r.ExpiresAt = r.At.Truncate(time.Microsecond), time.Time{} // the CLI's shape has no expires_at
			if !reflect.DeepEqual(again.Records[i], r) {
				t.Fatalf("record %d: decoded %+v, encoded and decoded again %+v", i, r, again.Records[i])
			}
		}
	})
}

// FuzzResult: whatever a server sends as a result either fails to decode
// or encodes back to the same result.
func FuzzResult(f *testing.F) {
	f.Add([]byte(`{"status":"acquired","replayed":false,"request_id":"r","message":"m","lease":{"namespace":"ns","key":"k","owner":"o","token":42,"acquired_at":"2026-01-02T15:04:05.000001Z","renewed_at":null,"expires_at":"2026-01-02T15:05:05Z","version":1,"lock_delay":"15s"}}`))
	f.Add([]byte(`{"status":"conflict","lease":{"token":9223372036854775807,"lock_delay":"2d"}}`))
	f.Add([]byte(`{"status":"not_found","lease":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r wire.Result
		if json.Unmarshal(body, &r) != nil {
			return
		}
		res, err := r.Protocol(protocol.OpGet)
		if err != nil {
			return
		}
		if res.Lease != nil && res.Lease.LockDelay < 0 {
			t.Fatalf("decoded a negative lock-delay: %+v", *res.Lease)
		}
		again, err := wire.FromResult(res, res.Message).Protocol(protocol.OpGet)
		if err != nil {
			t.Fatalf("a decoded result does not decode again: %v", err)
		}
		if res.Lease != nil {
			for _, tm := range []*time.Time{&res.Lease.AcquiredAt, &res.Lease.RenewedAt, &res.Lease.ExpiresAt} {
				*tm = tm.Truncate(time.Microsecond)
			}
		}
		if !reflect.DeepEqual(again, res) {
			t.Fatalf("decoded %+v, encoded and decoded again %+v", res, again)
		}
	})
}

// A lease of a format version this release does not know is refused
// naming both versions and the fix, as a record of one is.
func TestLeaseOfAnotherFormatVersionIsRefused(t *testing.T) {
	t.Parallel()
	exp := "2026-01-02T15:05:05.000000Z"
	good := wire.Lease{Namespace: "ns", Key: "k", Owner: "o", Token: 7, ExpiresAt: &exp, Version: protocol.LeaseFormatVersion}
	if _, err := good.Protocol(); err != nil {
		t.Fatalf("a lease of this release's version: %v", err)
	}
	for _, v := range []int{0, protocol.LeaseFormatVersion + 1} {
		l := good
		l.Version = v
		if _, err := l.Protocol(); err == nil || !strings.Contains(err.Error(), "upgrade") {
			t.Errorf("lease of format version %d: err %v, want a refusal naming both versions and the fix", v, err)
		}
		if _, err := (wire.Result{Status: "found", Lease: &l}).Protocol(protocol.OpGet); err == nil {
			t.Errorf("result with a lease of format version %d: accepted", v)
		}
	}
}
