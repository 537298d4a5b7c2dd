package backendkit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

var testKey = protocol.Key{Namespace: "ns", Name: "job-1"}

func TestListCursorRoundTrip(t *testing.T) {
	for _, name := range []string{"a", "job-10", "名前/with/slashes", strings.Repeat("k", protocol.MaxNameLen), "c1.nested"} {
		c := backendkit.EncodeListCursor(name)
		if !strings.HasPrefix(c, "c1.") {
			t.Errorf("backendkit.EncodeListCursor(%q) = %q, want prefix c1.", name, c)
		}
		got, err := backendkit.DecodeListCursor(c)
		if err != nil || got != name {
			t.Errorf("backendkit.DecodeListCursor(backendkit.EncodeListCursor(%q)) = %q, %v", name, got, err)
		}
	}
	for _, c := range []string{"", "c1.", "c2.YQ", "YQ", "c1.YQ==", "c1.!", backendkit.EncodeListCursor("a\x00"), "c1." + "_w"} {
		if name, err := backendkit.DecodeListCursor(c); err == nil {
			t.Errorf("backendkit.DecodeListCursor(%q) = %q, nil; want an error", c, name)
		} else if !strings.HasPrefix(err.Error(), "cursor: ") {
			t.Errorf("backendkit.DecodeListCursor(%q) error %q lacks the noun prefix", c, err)
		}
	}
}

func TestFingerprints(t *testing.T) {
	acq := protocol.AcquireRequest{Key: testKey, Owner: "w1", TTL: time.Minute, RequestID: "r1"}
	other := acq
	other.RequestID = "r2"
	if backendkit.Fingerprint(acq) != backendkit.Fingerprint(other) {
		t.Error("the acquire fingerprint depends on the request id")
	}
	if len(backendkit.Fingerprint(acq)) != 64 {
		t.Errorf("fingerprint %q is not 64 hex digits", backendkit.Fingerprint(acq))
	}
	distinct := map[string]string{}
	add := func(what, fp string) {
		t.Helper()
		if prev, dup := distinct[fp]; dup {
			t.Errorf("%s and %s share a fingerprint", prev, what)
		}
		distinct[fp] = what
	}
	add("acquire", backendkit.Fingerprint(acq))
	add("acquire other owner", backendkit.Fingerprint(protocol.AcquireRequest{Key: testKey, Owner: "w2", TTL: time.Minute}))
	add("acquire other ttl", backendkit.Fingerprint(protocol.AcquireRequest{Key: testKey, Owner: "w1", TTL: time.Hour}))
	add("acquire other key", backendkit.Fingerprint(protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "job-2"}, Owner: "w1", TTL: time.Minute}))
	// The key's parts are length-prefixed: moving bytes between them changes the fingerprint.
	add("acquire resplit key", backendkit.Fingerprint(protocol.AcquireRequest{Key: protocol.Key{Namespace: "nsj", Name: "ob-1"}, Owner: "w1", TTL: time.Minute}))
	add("renew", backendkit.Fingerprint(protocol.RenewRequest{Key: testKey, Owner: "w1", Token: 1, TTL: time.Minute}))
	add("renew other token", backendkit.Fingerprint(protocol.RenewRequest{Key: testKey, Owner: "w1", Token: 2, TTL: time.Minute}))
	add("release", backendkit.Fingerprint(protocol.ReleaseRequest{Key: testKey, Owner: "w1", Token: 1}))
	add("revoke", backendkit.Fingerprint(protocol.RevokeRequest{Key: testKey, Actor: "w1", Reason: "r", Token: 1}))
	// Actor and reason are separate fields: "ab"+"c" differs from "a"+"bc".
	add("revoke actor/reason split 1", backendkit.Fingerprint(protocol.RevokeRequest{Key: testKey, Actor: "ab", Reason: "c"}))
	add("revoke actor/reason split 2", backendkit.Fingerprint(protocol.RevokeRequest{Key: testKey, Actor: "a", Reason: "bc"}))
}

// holderLeases returns a clock reading and two leases of w1 with token 5
// at testKey: cur, live until a second after now, and expired, at now.
func holderLeases() (now time.Time, cur, expired *protocol.Lease) {
	now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cur = &protocol.Lease{Key: testKey, Owner: "w1", Token: 5, ExpiresAt: now.Add(time.Second)}
	expired = &protocol.Lease{Key: testKey, Owner: "w1", Token: 5, ExpiresAt: now}
	return now, cur, expired
}

func TestCheckHolder(t *testing.T) {
	now, cur, expired := holderLeases()
	tests := []struct {
		name  string
		cur   *protocol.Lease
		owner string
		token int64
		want  protocol.Status
	}{
		{"no row", nil, "w1", 5, protocol.StatusNotFound},
		{"older token", cur, "w1", 4, protocol.StatusStaleToken},
		{"older token, other owner", cur, "w2", 4, protocol.StatusStaleToken},
		{"older token, expired", expired, "w1", 4, protocol.StatusStaleToken},
		{"same token, other owner", cur, "w2", 5, protocol.StatusNotOwner},
		{"newer token", cur, "w1", 6, protocol.StatusNotOwner},
		{"same token, other owner, expired", expired, "w2", 5, protocol.StatusNotOwner},
		{"rightful holder, expired", expired, "w1", 5, protocol.StatusExpired},
		{"rightful holder, live", cur, "w1", 5, ""},
	}
	for _, tc := range tests {
		if got := backendkit.CheckHolder(tc.cur, tc.owner, tc.token, now); got != tc.want {
			t.Errorf("%s: CheckHolder = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckRevoke(t *testing.T) {
	now, cur, expired := holderLeases()
	tests := []struct {
		name  string
		cur   *protocol.Lease
		token int64
		want  protocol.Status
	}{
		{"no row", nil, 0, protocol.StatusNotFound},
		{"no row, token", nil, 5, protocol.StatusNotFound},
		{"any token", cur, 0, ""},
		{"matching token", cur, 5, ""},
		{"older token", cur, 4, protocol.StatusStaleToken},
		{"newer token", cur, 6, protocol.StatusNotOwner},
		{"older token, expired", expired, 4, protocol.StatusStaleToken},
		{"expired", expired, 0, protocol.StatusNotFound},
		{"matching token, expired", expired, 5, protocol.StatusNotFound},
	}
	for _, tc := range tests {
		if got := backendkit.CheckRevoke(tc.cur, tc.token, now); got != tc.want {
			t.Errorf("%s: CheckRevoke = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckAcquire(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := backendkit.CheckAcquire(nil, now); got != "" {
		t.Errorf("no row: %q, want \"\"", got)
	}
	if got := backendkit.CheckAcquire(&protocol.Lease{ExpiresAt: now}, now); got != "" {
		t.Errorf("expired at now: %q, want \"\"", got)
	}
	if got := backendkit.CheckAcquire(&protocol.Lease{ExpiresAt: now.Add(time.Microsecond)}, now); got != protocol.StatusConflict {
		t.Errorf("live: %q, want conflict", got)
	}
}
