package backendkit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var (
	at  = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	exp = at.Add(time.Minute)
	k   = protocol.Key{Namespace: "ns", Name: "job"}
)

func TestNewRecorded(t *testing.T) {
	l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at.Add(-time.Hour), RenewedAt: at, ExpiresAt: exp, Version: 1}
	r := backendkit.NewRecorded(at, protocol.OpRenew, protocol.StatusRenewed, l, "rid", "fp", "w1", "")
	want := backendkit.Recorded{Record: audit.Record{At: at, Op: protocol.OpRenew, Namespace: "ns", Key: "job", Owner: "w1",
		Token: 7, RequestID: "rid", Actor: "w1", Status: protocol.StatusRenewed, Version: audit.RecordFormatVersion, ExpiresAt: exp},
		ParamsHash: "fp", AcquiredAt: l.AcquiredAt, RenewedAt: l.RenewedAt}
	if r != want {
		t.Fatalf("renew record = %+v, want %+v", r, want)
	}
	r = backendkit.NewRecorded(at, protocol.OpRevoke, protocol.StatusRevoked, l, "rid", "fp", "operator", "stuck")
	if !r.ExpiresAt.Equal(exp) || r.Actor != "operator" || r.Reason != "stuck" || r.Owner != "w1" {
		t.Fatalf("revoke record = %+v, want the lease's expiry, the operator as actor, the lease's owner as owner", r)
	}
}

func TestReplay(t *testing.T) {
	acq := protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "rid"}
	l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at, RenewedAt: at, ExpiresAt: exp, Version: 1}
	rec := backendkit.NewRecorded(at, protocol.OpAcquire, protocol.StatusAcquired, l, "rid", backendkit.Fingerprint(acq), "w1", "")

	res := backendkit.Replay(rec, protocol.OpAcquire, backendkit.Fingerprint(acq))
	if res.Status != protocol.StatusAcquired || !res.Replayed || res.Lease == nil || *res.Lease != l {
		t.Fatalf("replay of acquire = %+v (lease %+v); want acquired, replayed, lease %+v", res, res.Lease, l)
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
	}{{protocol.OpRenew, protocol.StatusRenewed, backendkit.Fingerprint(ren)}, {protocol.OpRelease, protocol.StatusReleased, backendkit.Fingerprint(rel)}} {
		rr := backendkit.NewRecorded(at, c.op, c.st, held, "rid2", c.fp, "w1", "")
		res = backendkit.Replay(rr, c.op, c.fp)
		if !res.Replayed || res.Status != c.st || *res.Lease != held {
			t.Fatalf("replay of %s = %+v (lease %+v); want lease %+v", c.op, res, res.Lease, held)
		}
	}

	// A record written before schema version 2 lacks acquired_at and
	// renewed_at: a renew's replay has no acquired_at to give.
	rr := backendkit.NewRecorded(at, protocol.OpRenew, protocol.StatusRenewed, l, "rid2", backendkit.Fingerprint(ren), "w1", "")
	rr.AcquiredAt, rr.RenewedAt = time.Time{}, time.Time{}
	res = backendkit.Replay(rr, protocol.OpRenew, backendkit.Fingerprint(ren))
	if !res.Replayed || !res.Lease.AcquiredAt.IsZero() || !res.Lease.RenewedAt.Equal(at) || !res.Lease.ExpiresAt.Equal(exp) {
		t.Fatalf("replay of a version 1 renew = %+v (lease %+v)", res, res.Lease)
	}

	// The same id with other parameters, or for another operation, is invalid.
	other := acq
	other.TTL = 2 * time.Minute
	for _, c := range []struct {
		op protocol.Op
		fp string
	}{{protocol.OpAcquire, backendkit.Fingerprint(other)}, {protocol.OpRenew, backendkit.Fingerprint(acq)}} {
		res := backendkit.Replay(rec, c.op, c.fp)
		if res.Status != protocol.StatusInvalid || res.Replayed || res.Lease != nil || !strings.Contains(res.Message, "rid") {
			t.Fatalf("replay as %s with fingerprint %.8s = %+v; want invalid naming the request id", c.op, c.fp, res)
		}
	}
}

// A reused request id's refusal names the earlier request's key as every
// surface prints one (NS/NAME, the namespace escaped), so that it reads
// back as that key: a name with "/" printed bare reads as another key.
func TestReplayReusedIDNamesThePrintedKey(t *testing.T) {
	for _, key := range []protocol.Key{{Namespace: "p", Name: "q/k"}, {Namespace: "t/x", Name: "k"}} {
		acq := protocol.AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute, RequestID: "rid"}
		l := protocol.Lease{Key: key, Owner: "w1", Token: 7, AcquiredAt: at, RenewedAt: at, ExpiresAt: exp, Version: 1}
		rec := backendkit.NewRecorded(at, protocol.OpAcquire, protocol.StatusAcquired, l, "rid", backendkit.Fingerprint(acq), "w1", "")
		res := backendkit.Replay(rec, protocol.OpRelease, "other")
		if want := "earlier acquire of " + key.String() + " "; res.Status != protocol.StatusInvalid || !strings.Contains(res.Message, want) {
			t.Errorf("reused id of an acquire of %#v: %s %q; want invalid, naming %q", key, res.Status, res.Message, key.String())
		}
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
	p := backendkit.LeasePage(nil, 2)
	if p.Status != protocol.StatusFound || p.Leases == nil || len(p.Leases) != 0 || p.NextCursor != "" {
		t.Fatalf("empty page = %+v, want found, an empty non-nil slice, no cursor", p)
	}
	p = backendkit.LeasePage(rows("a", "b"), 2)
	if len(p.Leases) != 2 || p.NextCursor != "" {
		t.Fatalf("full last page = %+v, want 2 leases and no cursor", p)
	}
	p = backendkit.LeasePage(rows("a", "b", "c"), 2)
	if len(p.Leases) != 2 || p.Leases[1].Key.Name != "b" {
		t.Fatalf("page with more = %+v, want a and b", p)
	}
	if name, err := backendkit.DecodeListCursor(p.NextCursor); err != nil || name != "b" {
		t.Fatalf("cursor decodes to %q, %v; want b", name, err)
	}
}

func TestAuditPage(t *testing.T) {
	p := backendkit.AuditPage(nil, audit.Query{Limit: 1})
	if p.Records == nil || len(p.Records) != 0 || p.NextCursor != "" {
		t.Fatalf("empty page = %+v", p)
	}
	p = backendkit.AuditPage([]audit.Record{{ID: 4}, {ID: 9}}, audit.Query{Limit: 1})
	if len(p.Records) != 1 || p.Records[0].ID != 4 {
		t.Fatalf("page = %+v, want record 4", p)
	}
	if id, err := audit.DecodeCursor(p.NextCursor); err != nil || id != 4 {
		t.Fatalf("cursor decodes to %d, %v; want 4", id, err)
	}
	// Newest first: the cursor resumes before the last record, newest first.
	p = backendkit.AuditPage([]audit.Record{{ID: 9}, {ID: 4}}, audit.Query{Limit: 1, Newest: true})
	if len(p.Records) != 1 || p.Records[0].ID != 9 || p.NextCursor != audit.EncodeNewestCursor(9) {
		t.Fatalf("newest-first page = %+v, want record 9 and cursor %q", p, audit.EncodeNewestCursor(9))
	}
}

func TestFollowPage(t *testing.T) {
	follow := audit.Query{Limit: 2, Follow: true, Cursor: audit.EncodeCursor(3)}
	for _, c := range []struct {
		what   string
		rows   []audit.Record
		q      audit.Query
		passed int64
		want   string
	}{
		{"last page, none selected", nil, follow, 20, audit.EncodeCursor(20)},
		{"last page, passed below the cursor", nil, follow, 2, audit.EncodeCursor(3)},
		{"last page after its record", []audit.Record{{ID: 7}}, follow, 12, audit.EncodeCursor(12)},
		{"full page", []audit.Record{{ID: 7}, {ID: 8}, {ID: 9}}, follow, 12, audit.EncodeCursor(8)},
		{"not a follower's read", nil, audit.Query{Limit: 2}, 20, ""},
	} {
		if p := backendkit.FollowPage(c.rows, c.q, c.passed); p.FollowCursor != c.want {
			t.Errorf("%s: follow cursor %q, want %q", c.what, p.FollowCursor, c.want)
		}
	}
}

func TestRefusedAndFound(t *testing.T) {
	l := &protocol.Lease{Key: k, Owner: "w1", Token: 7, ExpiresAt: exp}
	if r := backendkit.Refused(protocol.StatusNotFound, l); r.Status != protocol.StatusNotFound || r.Lease != nil {
		t.Fatalf("not_found carries %+v, want no lease", r.Lease)
	}
	for _, st := range []protocol.Status{protocol.StatusConflict, protocol.StatusStaleToken, protocol.StatusNotOwner, protocol.StatusExpired} {
		if r := backendkit.Refused(st, l); r.Status != st || r.Lease != l {
			t.Fatalf("%s carries %+v, want the current lease", st, r.Lease)
		}
	}
	if r := backendkit.Found(l, nil, exp.Add(-time.Nanosecond)); r.Status != protocol.StatusFound || r.Lease != l {
		t.Fatalf("get of a live lease: %+v", r)
	}
	for _, cur := range []*protocol.Lease{nil, l} {
		if r := backendkit.Found(cur, nil, exp); r.Status != protocol.StatusNotFound || r.Lease != nil {
			t.Fatalf("get at expiry of %+v: %+v, want not_found without a lease", cur, r)
		}
	}
}

// TestFoundWithinALockDelay: a get answers not_found carrying the ended
// lease while its lock-delay keeps the key (an expired row, or the lease a
// revoke ended), with a message naming when the key is free; a live lease
// wins; once the delay passed, not_found without a lease.
func TestFoundWithinALockDelay(t *testing.T) {
	expired := &protocol.Lease{Key: k, Owner: "w1", Token: 7, ExpiresAt: exp, LockDelay: time.Second}
	revoked := &protocol.Lease{Key: k, Owner: "w1", Token: 8, ExpiresAt: exp.Add(time.Second), LockDelay: time.Second}
	live := &protocol.Lease{Key: k, Owner: "w2", Token: 9, ExpiresAt: exp.Add(time.Hour), LockDelay: time.Second}
	free := exp.Add(2 * time.Second).Format(time.RFC3339Nano)
	for _, c := range []struct {
		what       string
		cur, ended *protocol.Lease
		now        time.Time
		want       protocol.Status
		lease      *protocol.Lease
		messageHas string
	}{
		{"expired, within its delay", expired, nil, exp, protocol.StatusNotFound, expired, "lock-delay until " + exp.Add(time.Second).Format(time.RFC3339Nano) + " (lease of w1, token 7, ended at " + exp.Format(time.RFC3339Nano) + ")"},
		{"expired, its delay passed", expired, nil, exp.Add(time.Second), protocol.StatusNotFound, nil, ""},
		{"revoked, within its delay", nil, revoked, exp.Add(time.Second), protocol.StatusNotFound, revoked, "lock-delay until " + free + " (lease of w1, token 8"},
		{"revoked, judged ended before its end time", nil, revoked, exp, protocol.StatusNotFound, revoked, "lock-delay until " + free + " (lease of w1, token 8"},
		{"revoked, its delay passed", nil, revoked, exp.Add(2 * time.Second), protocol.StatusNotFound, nil, ""},
		{"an expired row without a delay, a revoked lease within its delay", &protocol.Lease{Key: k, Token: 6, ExpiresAt: exp}, revoked, exp.Add(time.Second), protocol.StatusNotFound, revoked, "lock-delay until " + free + " (lease of w1, token 8"},
		{"live", live, revoked, exp.Add(time.Second), protocol.StatusFound, live, ""},
	} {
		r := backendkit.Found(c.cur, c.ended, c.now)
		if r.Status != c.want || r.Lease != c.lease || !strings.Contains(r.Message, c.messageHas) || (c.messageHas == "" && r.Message != "") {
			t.Errorf("%s: %s %+v %q; want %s %+v, message with %q", c.what, r.Status, r.Lease, r.Message, c.want, c.lease, c.messageHas)
		}
	}
}

// A store that judges the end of a lock-delay late, never early (etcd),
// may still keep the key at or after FreeAt: the conflict's and the get's
// messages then say that the delay ended then and the store has not yet
// freed the key, not that the key is free at a time already past.
func TestLockDelayMessagesPastTheEnd(t *testing.T) {
	ended := protocol.Lease{Key: k, Owner: "w1", Token: 8, ExpiresAt: exp, LockDelay: time.Second}
	free := ended.FreeAt().Format(time.RFC3339Nano)
	for _, c := range []struct {
		now       time.Time
		want, not string
	}{
		{ended.FreeAt().Add(-time.Microsecond), "the key is free at " + free, "not yet"},
		{ended.FreeAt(), "its lock-delay ended at " + free + ", but the store has not yet freed the key", "free at"},
		{ended.FreeAt().Add(2 * time.Second), "its lock-delay ended at " + free + ", but the store has not yet freed the key", "free at"},
	} {
		msg := backendkit.LockDelayMessage(ended, c.now)
		if !strings.HasPrefix(msg, protocol.LockDelayPrefix) || !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
			t.Errorf("conflict at %s: %q; want %q after the prefix %q, without %q", c.now.Format(time.RFC3339Nano), msg, c.want, protocol.LockDelayPrefix, c.not)
		}
	}
	r := backendkit.Delayed(&ended, ended.FreeAt().Add(time.Second))
	if want := "no live lease; the lock-delay ended at " + free + ", but the store has not yet freed the key"; r.Status != protocol.StatusNotFound ||
		r.Lease == nil || !strings.HasPrefix(r.Message, want) || strings.Contains(r.Message, "until") || !strings.Contains(r.Message, "(lease of w1, token 8, ended at ") {
		t.Errorf("get past the end: %s %q; want not_found carrying the lease, message starting %q", r.Status, r.Message, want)
	}
}

// A store that sees expiry late, never early (etcd), may answer conflict
// with a lease past its ExpiresAt: the message then says it expired then
// and the store has not yet freed the key; before, there is none (the
// default says until when it is held), and never the lock-delay prefix.
func TestExpiredMessagePastExpiry(t *testing.T) {
	l := protocol.Lease{Key: k, Owner: "w1", Token: 8, ExpiresAt: exp, LockDelay: time.Second}
	if msg := backendkit.ExpiredMessage(l, exp.Add(-time.Microsecond)); msg != "" {
		t.Errorf("conflict while live: %q, want none", msg)
	}
	want := "the lease of w1 (token 8) expired at " + exp.UTC().Format(time.RFC3339Nano) + ", but the store has not yet freed the key"
	for _, now := range []time.Time{exp, exp.Add(2 * time.Second)} {
		if msg := backendkit.ExpiredMessage(l, now); !strings.HasPrefix(msg, want) || strings.HasPrefix(msg, protocol.LockDelayPrefix) {
			t.Errorf("conflict at %s: %q; want it to start %q", now.Format(time.RFC3339Nano), msg, want)
		}
	}
}

func TestListStart(t *testing.T) {
	after, limit, err := backendkit.ListStart(protocol.ListRequest{Namespace: "ns"})
	if after != "" || limit != protocol.DefaultListLimit || err != nil {
		t.Fatalf("first page: %q %d %v", after, limit, err)
	}
	after, limit, err = backendkit.ListStart(protocol.ListRequest{Namespace: "ns", Limit: 7, Cursor: backendkit.EncodeListCursor("job-9")})
	if after != "job-9" || limit != 7 || err != nil {
		t.Fatalf("next page: %q %d %v", after, limit, err)
	}
	if _, _, err := backendkit.ListStart(protocol.ListRequest{Namespace: "ns", Cursor: "garbage"}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("bad cursor: %v, want invalid", err)
	}
}

// Unanswered gives a bulk call's request its error's status (unavailable
// when the error carries none of the vocabulary's failures) and the
// error's detail, without the head naming the operation and key.
func TestUnanswered(t *testing.T) {
	for _, c := range []struct {
		err  error
		st   protocol.Status
		text string
	}{
		{backendkit.NewError(protocol.OpRenew, protocol.StatusTimeout, errors.New("slow"), "etcd: no answer"), protocol.StatusTimeout, "etcd: no answer: slow"},
		{&protocol.Error{Op: protocol.OpRenew, Key: k, Status: protocol.StatusClosed, Message: "closed"}, protocol.StatusClosed, "closed"},
		{&protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusRenewed}, protocol.StatusUnavailable, "renewed"},
		{&protocol.Error{Op: protocol.OpRenew, Status: "odd", Message: "odd"}, protocol.StatusUnavailable, "odd"},
		{errors.New("connection reset"), protocol.StatusUnavailable, "connection reset"},
		{context.DeadlineExceeded, protocol.StatusTimeout, context.DeadlineExceeded.Error()},
	} {
		res := backendkit.Unanswered(c.err)
		if res.Status != c.st || res.Message != c.text || res.Lease != nil {
			t.Errorf("Unanswered(%v) = %+v, want %s with message %q", c.err, res, c.st, c.text)
		}
	}
}

// previousAcquireHash is the fingerprint an earlier release stored for an
// acquire whose lock-delay was delay, the namespace default filled in
// before the backend saw the request or the one it asked for, computed
// as that release did (SHA-256 over op, key, owner, TTL and, for a
// non-zero delay, "lock_delay=NANOSECONDS", joined by NUL), so that a
// change of Fingerprint cannot hide a record it no longer matches.
func previousAcquireHash(req protocol.AcquireRequest, delay time.Duration) string {
	parts := []string{string(protocol.OpAcquire), req.Key.Encode(), req.Owner, strconv.FormatInt(int64(req.TTL), 10)}
	if delay != 0 {
		parts = append(parts, "lock_delay="+strconv.FormatInt(int64(delay), 10))
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// TestReplayAcquire: an acquire's retry is compared on its lock-delay with
// the lease the first attempt got, never with the namespace default now:
// asking for none matches any, asking for D only D. Records written by a
// release that hashed the default in replay for retries of the same
// request, also once the default changed (by the record's lock-delay) and,
// in a record written before schema 5 (no lock-delay in it), while the
// default is the same (as that release replayed them).
func TestReplayAcquire(t *testing.T) {
	const dflt, other = 7 * time.Second, 30 * time.Second
	none := protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "rid"}
	asking := func(d, def time.Duration) protocol.AcquireRequest {
		r := none
		r.LockDelay, r.DefaultLockDelay = d, def
		return r
	}
	if backendkit.Fingerprint(none) != previousAcquireHash(none, 0) || backendkit.Fingerprint(asking(dflt, other)) != previousAcquireHash(none, dflt) {
		t.Fatal("an acquire's fingerprint is not the previous release's for the lock-delay it asks for: " +
			"its records would not replay during a rolling deploy")
	}
	record := func(hash string, got time.Duration) backendkit.Recorded {
		l := protocol.Lease{Key: k, Owner: "w1", Token: 7, AcquiredAt: at, RenewedAt: at, ExpiresAt: exp, Version: 1, LockDelay: got}
		return backendkit.NewRecorded(at, protocol.OpAcquire, protocol.StatusAcquired, l, "rid", hash, "w1", "")
	}
	for _, c := range []struct {
		what  string
		rec   backendkit.Recorded
		retry protocol.AcquireRequest
		want  time.Duration // the replayed lease's lock-delay; -1: invalid
	}{
		// Written by this release: the request asked for none, the lease got the default.
		{"none, default changed", record(backendkit.Fingerprint(none), dflt), asking(0, other), dflt},
		{"none, no default now", record(backendkit.Fingerprint(none), dflt), asking(0, 0), dflt},
		{"asking for what the lease got", record(backendkit.Fingerprint(none), dflt), asking(dflt, other), dflt},
		{"asking for what the lease got, finer than stored", record(backendkit.Fingerprint(none), dflt), asking(dflt+999, 0), dflt},
		{"asking for the default now", record(backendkit.Fingerprint(none), dflt), asking(other, other), -1},
		{"none, none got", record(backendkit.Fingerprint(none), 0), asking(0, other), 0},
		{"asking for one, none got", record(backendkit.Fingerprint(none), 0), asking(dflt, 0), -1},
		// Written by this release: the request asked for one.
		{"asked, retried asking for none", record(backendkit.Fingerprint(asking(dflt, 0)), dflt), asking(0, other), dflt},
		{"asked, retried asking for another", record(backendkit.Fingerprint(asking(dflt, 0)), dflt), asking(other, 0), -1},
		// Written by the previous release, the default filled in (7s).
		{"previous, default unchanged", record(previousAcquireHash(none, dflt), dflt), asking(0, dflt), dflt},
		{"previous, default changed", record(previousAcquireHash(none, dflt), dflt), asking(0, other), dflt},
		{"previous, default gone", record(previousAcquireHash(none, dflt), dflt), asking(0, 0), dflt},
		{"previous, asking for what it got", record(previousAcquireHash(none, dflt), dflt), asking(dflt, other), dflt},
		{"previous, no default then", record(previousAcquireHash(none, 0), 0), asking(0, other), 0},
		// Written before schema 5 (no lock-delay in the record): only the
		// default now can tell, as the previous release replayed them.
		{"before schema 5, default unchanged", record(previousAcquireHash(none, dflt), 0), asking(0, dflt), dflt},
		{"before schema 5, asking for it", record(previousAcquireHash(none, dflt), 0), asking(dflt, 0), dflt},
		{"before schema 5, default changed", record(previousAcquireHash(none, dflt), 0), asking(0, other), -1},
	} {
		res := backendkit.ReplayAcquire(c.rec, c.retry)
		if c.want < 0 {
			if res.Status != protocol.StatusInvalid || res.Replayed {
				t.Errorf("%s: %s %q, want invalid", c.what, res.Status, res.Message)
			}
			continue
		}
		if res.Status != protocol.StatusAcquired || !res.Replayed || res.Lease == nil || res.Lease.Token != 7 || res.Lease.LockDelay != c.want {
			t.Errorf("%s: %s %q (lease %+v), want a replay of token 7 with lock-delay %v", c.what, res.Status, res.Message, res.Lease, c.want)
		}
	}
	// The other parameters still count, whatever the lock-delay.
	rec := record(previousAcquireHash(none, dflt), dflt)
	for _, r := range []protocol.AcquireRequest{
		{Key: k, Owner: "w2", TTL: time.Minute, RequestID: "rid"},
		{Key: k, Owner: "w1", TTL: 2 * time.Minute, RequestID: "rid", DefaultLockDelay: dflt},
		{Key: protocol.Key{Namespace: "ns", Name: "other"}, Owner: "w1", TTL: time.Minute, RequestID: "rid", LockDelay: dflt},
	} {
		if res := backendkit.ReplayAcquire(rec, r); res.Status != protocol.StatusInvalid {
			t.Errorf("retry %+v of another acquire: %s, want invalid", r, res.Status)
		}
	}
	if res := backendkit.ReplayAcquire(backendkit.NewRecorded(at, protocol.OpRenew, protocol.StatusRenewed,
		protocol.Lease{Key: k, Owner: "w1", Token: 7}, "rid", backendkit.Fingerprint(none), "w1", ""), none); res.Status != protocol.StatusInvalid {
		t.Errorf("an acquire with a renew's id: %s, want invalid", res.Status)
	}
}
