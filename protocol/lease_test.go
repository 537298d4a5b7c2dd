package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/listcursor"
)

var testKey = Key{Namespace: "ns", Name: "job-1"}

// wantInvalid asserts that err is non-nil and mentions every fragment.
func wantInvalid(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: Validate() = nil, want an error", what)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: Validate() = %q, want it to mention %q", what, err, f)
		}
	}
}

func TestAcquireRequestValidate(t *testing.T) {
	ok := AcquireRequest{Key: testKey, Owner: "w1", TTL: 30 * time.Second, RequestID: "r1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid acquire: %v", err)
	}
	for _, ttl := range []time.Duration{MinTTL, MaxTTL} {
		r := ok
		r.TTL = ttl
		if err := r.Validate(); err != nil {
			t.Errorf("acquire with TTL %v at the bound: %v", ttl, err)
		}
	}
	mut := func(f func(*AcquireRequest)) AcquireRequest { r := ok; f(&r); return r }
	wantInvalid(t, "no key", mut(func(r *AcquireRequest) { r.Key = Key{} }).Validate(), "namespace")
	wantInvalid(t, "bad name", mut(func(r *AcquireRequest) { r.Key.Name = "a\nb" }).Validate(), "key: control")
	wantInvalid(t, "no owner", mut(func(r *AcquireRequest) { r.Owner = "" }).Validate(), "owner: must not be empty")
	wantInvalid(t, "long owner", mut(func(r *AcquireRequest) { r.Owner = strings.Repeat("o", MaxOwnerLen+1) }).Validate(), "owner:")
	wantInvalid(t, "zero ttl", mut(func(r *AcquireRequest) { r.TTL = 0 }).Validate(), "ttl:")
	wantInvalid(t, "negative ttl", mut(func(r *AcquireRequest) { r.TTL = -time.Second }).Validate(), "ttl:")
	wantInvalid(t, "ttl below min", mut(func(r *AcquireRequest) { r.TTL = MinTTL - 1 }).Validate(), "ttl:")
	wantInvalid(t, "ttl above max", mut(func(r *AcquireRequest) { r.TTL = MaxTTL + 1 }).Validate(), "ttl:")
	wantInvalid(t, "negative lock delay", mut(func(r *AcquireRequest) { r.LockDelay = -1 }).Validate(), "lock delay:")
	wantInvalid(t, "lock delay above max", mut(func(r *AcquireRequest) { r.LockDelay = MaxLockDelay + 1 }).Validate(), "lock delay:")
	if err := mut(func(r *AcquireRequest) { r.LockDelay = MaxLockDelay }).Validate(); err != nil {
		t.Errorf("lock delay at the bound: %v", err)
	}
	wantInvalid(t, "no request id", mut(func(r *AcquireRequest) { r.RequestID = "" }).Validate(), "request id: must not be empty")
	wantInvalid(t, "long request id", mut(func(r *AcquireRequest) { r.RequestID = strings.Repeat("r", MaxRequestIDLen+1) }).Validate(), "request id:")
	// Every problem is reported at once.
	wantInvalid(t, "everything wrong", AcquireRequest{}.Validate(), "namespace", "owner", "ttl", "request id")
}

func TestRenewRequestValidate(t *testing.T) {
	ok := RenewRequest{Key: testKey, Owner: "w1", Token: 1, TTL: time.Minute, RequestID: "r1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid renew: %v", err)
	}
	mut := func(f func(*RenewRequest)) RenewRequest { r := ok; f(&r); return r }
	wantInvalid(t, "no key", mut(func(r *RenewRequest) { r.Key.Namespace = "" }).Validate(), "namespace")
	wantInvalid(t, "no owner", mut(func(r *RenewRequest) { r.Owner = "" }).Validate(), "owner")
	wantInvalid(t, "zero token", mut(func(r *RenewRequest) { r.Token = 0 }).Validate(), "token: must be positive")
	wantInvalid(t, "negative token", mut(func(r *RenewRequest) { r.Token = -4 }).Validate(), "token: must be positive, got -4")
	if err := mut(func(r *RenewRequest) { r.TTL = 0 }).Validate(); err != nil {
		t.Errorf("zero ttl (keep the lease's own): %v", err)
	}
	wantInvalid(t, "negative ttl", mut(func(r *RenewRequest) { r.TTL = -time.Second }).Validate(), "ttl:")
	wantInvalid(t, "no request id", mut(func(r *RenewRequest) { r.RequestID = "" }).Validate(), "request id")
	wantInvalid(t, "everything wrong", RenewRequest{TTL: -1}.Validate(), "namespace", "owner", "token", "ttl", "request id")
}

func TestReleaseRequestValidate(t *testing.T) {
	ok := ReleaseRequest{Key: testKey, Owner: "w1", Token: 9, RequestID: "r1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid release: %v", err)
	}
	mut := func(f func(*ReleaseRequest)) ReleaseRequest { r := ok; f(&r); return r }
	wantInvalid(t, "bad key", mut(func(r *ReleaseRequest) { r.Key.Name = "\xff" }).Validate(), "UTF-8")
	wantInvalid(t, "no owner", mut(func(r *ReleaseRequest) { r.Owner = "" }).Validate(), "owner")
	wantInvalid(t, "zero token", mut(func(r *ReleaseRequest) { r.Token = 0 }).Validate(), "token")
	wantInvalid(t, "bad request id", mut(func(r *ReleaseRequest) { r.RequestID = "a\tb" }).Validate(), "request id: control")
	wantInvalid(t, "everything wrong", ReleaseRequest{}.Validate(), "namespace", "owner", "token", "request id")
}

func TestGetRequestValidate(t *testing.T) {
	if err := (GetRequest{Key: testKey, RequestID: "r"}).Validate(); err != nil {
		t.Fatalf("valid get: %v", err)
	}
	wantInvalid(t, "no key", GetRequest{RequestID: "r"}.Validate(), "namespace")
	wantInvalid(t, "no request id", GetRequest{Key: testKey}.Validate(), "request id")
}

func TestRevokeRequestValidate(t *testing.T) {
	ok := RevokeRequest{Key: testKey, Actor: "ops@host", Reason: "stuck worker", RequestID: "r1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid revoke with token 0: %v", err)
	}
	mut := func(f func(*RevokeRequest)) RevokeRequest { r := ok; f(&r); return r }
	if err := mut(func(r *RevokeRequest) { r.Token = 12 }).Validate(); err != nil {
		t.Errorf("valid revoke with a token: %v", err)
	}
	wantInvalid(t, "negative token", mut(func(r *RevokeRequest) { r.Token = -1 }).Validate(), "token: must not be negative")
	wantInvalid(t, "no actor", mut(func(r *RevokeRequest) { r.Actor = "" }).Validate(), "actor")
	wantInvalid(t, "no reason", mut(func(r *RevokeRequest) { r.Reason = "" }).Validate(), "reason: must not be empty")
	wantInvalid(t, "long reason", mut(func(r *RevokeRequest) { r.Reason = strings.Repeat("x", MaxReasonLen+1) }).Validate(), "reason:")
	wantInvalid(t, "bad key", mut(func(r *RevokeRequest) { r.Key.Name = "" }).Validate(), "key")
	wantInvalid(t, "no request id", mut(func(r *RevokeRequest) { r.RequestID = "" }).Validate(), "request id")
}

func TestListRequestValidate(t *testing.T) {
	ok := ListRequest{Namespace: "ns", RequestID: "r1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal list: %v", err)
	}
	full := ListRequest{Namespace: "ns", Prefix: "job-", Owner: "w1", IncludeExpired: true,
		Limit: MaxListLimit, Cursor: listcursor.Encode("job-7"), RequestID: "r1"}
	if err := full.Validate(); err != nil {
		t.Fatalf("full list: %v", err)
	}
	mut := func(f func(*ListRequest)) ListRequest { r := ok; f(&r); return r }
	wantInvalid(t, "no namespace", mut(func(r *ListRequest) { r.Namespace = "" }).Validate(), "namespace")
	wantInvalid(t, "bad prefix", mut(func(r *ListRequest) { r.Prefix = "a\x00" }).Validate(), "prefix: control")
	wantInvalid(t, "bad owner", mut(func(r *ListRequest) { r.Owner = "\xff" }).Validate(), "owner")
	wantInvalid(t, "negative limit", mut(func(r *ListRequest) { r.Limit = -1 }).Validate(), "limit: -1")
	wantInvalid(t, "limit too big", mut(func(r *ListRequest) { r.Limit = MaxListLimit + 1 }).Validate(), "limit:")
	wantInvalid(t, "foreign cursor", mut(func(r *ListRequest) { r.Cursor = "a1.5" }).Validate(), "cursor: not a list cursor")
	wantInvalid(t, "malformed cursor", mut(func(r *ListRequest) { r.Cursor = "c1.!!" }).Validate(), "cursor: malformed")
	wantInvalid(t, "no request id", mut(func(r *ListRequest) { r.RequestID = "" }).Validate(), "request id")

	if got := ok.EffectiveLimit(); got != DefaultListLimit {
		t.Errorf("EffectiveLimit() of a zero limit = %d, want %d", got, DefaultListLimit)
	}
	if got := mut(func(r *ListRequest) { r.Limit = 7 }).EffectiveLimit(); got != 7 {
		t.Errorf("EffectiveLimit() = %d, want 7", got)
	}
}

func TestValidationErrorsAreJoined(t *testing.T) {
	err := AcquireRequest{}.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) < 4 {
		t.Fatalf("AcquireRequest{}.Validate() = %v, want the four problems joined", err)
	}
}

// KeptByLockDelay is the store's verdict, read from the message, on a
// Result and on the error an operation returns alike; a conflict with a
// live holder, another status, or no lease is not kept by a lock-delay.
func TestKeptByLockDelay(t *testing.T) {
	l := &Lease{Token: 3}
	delayed := LockDelayPrefix + "the lease ended"
	for _, c := range []struct {
		name string
		res  Result
		want bool
	}{
		{"lock-delay conflict", Result{Op: OpAcquire, Status: StatusConflict, Lease: l, Message: delayed}, true},
		{"live holder", Result{Op: OpAcquire, Status: StatusConflict, Lease: l, Message: "held by w2"}, false},
		{"no lease", Result{Op: OpAcquire, Status: StatusConflict, Message: delayed}, false},
		{"not a conflict", Result{Op: OpGet, Status: StatusNotFound, Lease: l, Message: delayed}, false},
	} {
		if got := c.res.KeptByLockDelay(); got != c.want {
			t.Errorf("%s: Result.KeptByLockDelay = %v, want %v", c.name, got, c.want)
		}
		var perr *Error
		err := c.res.Err()
		if errors.As(err, &perr) != (err != nil) {
			t.Fatalf("%s: Err() = %v, not a *Error", c.name, err)
		}
		if got := perr.KeptByLockDelay(); got != c.want {
			t.Errorf("%s: Error.KeptByLockDelay = %v, want %v", c.name, got, c.want)
		}
	}
}
