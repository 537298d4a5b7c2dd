package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStatusVocabulary pins the exact strings of DESIGN.md's table: they are
// shared by the Go API, leasectl's JSON and the audit trail.
func TestStatusVocabulary(t *testing.T) {
	want := []string{
		"acquired", "renewed", "released", "revoked", "found",
		"not_found", "conflict", "stale_token", "not_owner", "expired",
		"timeout", "unavailable", "closed", "invalid",
	}
	consts := []Status{
		StatusAcquired, StatusRenewed, StatusReleased, StatusRevoked, StatusFound,
		StatusNotFound, StatusConflict, StatusStaleToken, StatusNotOwner, StatusExpired,
		StatusTimeout, StatusUnavailable, StatusClosed, StatusInvalid,
	}
	if len(Statuses) != len(want) {
		t.Fatalf("Statuses has %d entries, want %d", len(Statuses), len(want))
	}
	for i, w := range want {
		if string(consts[i]) != w {
			t.Errorf("status constant #%d = %q, want %q", i, consts[i], w)
		}
		if string(Statuses[i]) != w {
			t.Errorf("Statuses[%d] = %q, want %q", i, Statuses[i], w)
		}
		if !Status(w).Known() {
			t.Errorf("Status(%q).Known() = false", w)
		}
	}
	for _, s := range []Status{"", "Acquired", "ok", "not-found", "acquired "} {
		if s.Known() {
			t.Errorf("Status(%q).Known() = true, want false", s)
		}
	}
}

func TestOpNames(t *testing.T) {
	got := []Op{OpAcquire, OpRenew, OpRelease, OpGet, OpList, OpRevoke, OpHealth, OpClose}
	want := []string{"acquire", "renew", "release", "get", "list", "revoke", "health", "close"}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("op #%d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestStatusSuccessAndSentinel(t *testing.T) {
	success := map[Status]bool{
		StatusAcquired: true, StatusRenewed: true, StatusReleased: true, StatusRevoked: true, StatusFound: true,
	}
	sentinels := make(map[error]Status)
	for _, s := range Statuses {
		if got := s.Success(); got != success[s] {
			t.Errorf("%q.Success() = %v, want %v", s, got, success[s])
		}
		sent := s.Sentinel()
		if success[s] {
			if sent != nil {
				t.Errorf("%q.Sentinel() = %v, want nil for a success", s, sent)
			}
			continue
		}
		if sent == nil {
			t.Errorf("%q.Sentinel() = nil, want a sentinel", s)
			continue
		}
		if prev, dup := sentinels[sent]; dup {
			t.Errorf("%q and %q share the sentinel %v", prev, s, sent)
		}
		sentinels[sent] = s
		if !strings.HasPrefix(sent.Error(), "lease: ") {
			t.Errorf("sentinel %q does not start with \"lease: \"", sent)
		}
	}
	if len(sentinels) != 9 {
		t.Errorf("%d sentinels, want 9 (one per non-success status)", len(sentinels))
	}
	for _, s := range []Status{"", "bogus"} {
		if s.Success() || s.Sentinel() != nil {
			t.Errorf("unknown status %q: Success() = %v, Sentinel() = %v; want false, nil", s, s.Success(), s.Sentinel())
		}
	}
}

func TestErrorMatching(t *testing.T) {
	holder := &Lease{Key: Key{Namespace: "ns", Name: "k"}, Owner: "worker-3", Token: 7, Version: LeaseFormatVersion}
	for _, s := range Statuses {
		if s.Success() {
			continue
		}
		var err error = &Error{Op: OpAcquire, Status: s, Key: holder.Key, Lease: holder}
		wrapped := fmt.Errorf("worker: %w", err)
		for _, other := range Statuses {
			sent := other.Sentinel()
			if sent == nil {
				continue
			}
			if got, want := errors.Is(wrapped, sent), other == s; got != want {
				t.Errorf("errors.Is(%s error, %v) = %v, want %v", s, sent, got, want)
			}
		}
		var e *Error
		if !errors.As(wrapped, &e) {
			t.Fatalf("errors.As(%s error, *Error) = false", s)
		}
		if e.Lease != holder || e.Lease.Owner != "worker-3" {
			t.Errorf("%s error carries lease %+v, want the holder", s, e.Lease)
		}
		if StatusOf(wrapped) != s {
			t.Errorf("StatusOf(%s error) = %q", s, StatusOf(wrapped))
		}
	}
	// A success status in an *Error matches no sentinel.
	if errors.Is(&Error{Status: StatusAcquired}, ErrConflict) {
		t.Error("an *Error with a success status matched ErrConflict")
	}
}

func TestErrorUnwrapsCause(t *testing.T) {
	cause := errors.New("driver: connection refused")
	err := newError(OpGet, StatusUnavailable, cause, "postgres: %s", "cannot connect")
	if !errors.Is(err, cause) {
		t.Error("errors.Is(err, cause) = false: the cause is not unwrappable")
	}
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimeout) {
		t.Error("newError(unavailable) does not match exactly ErrUnavailable")
	}
	if err.Message != "postgres: cannot connect" || err.Op != OpGet || err.Status != StatusUnavailable {
		t.Errorf("NewError built %+v", err)
	}
}

func TestErrorText(t *testing.T) {
	k := Key{Namespace: "ns", Name: "job"}
	cause := errors.New("dial tcp: refused")
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Op: OpAcquire, Status: StatusConflict, Key: k, Message: "held by w"}, "lease: acquire ns/job: conflict: held by w"},
		{&Error{Op: OpList, Status: StatusInvalid}, "lease: list: invalid"},
		{&Error{Op: OpGet, Status: StatusUnavailable, Key: k, Err: cause}, "lease: get ns/job: unavailable: dial tcp: refused"},
		{&Error{Op: OpGet, Status: StatusUnavailable, Key: k, Message: "postgres down", Err: cause}, "lease: get ns/job: unavailable: postgres down: dial tcp: refused"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want Status
	}{
		{nil, ""},
		{errors.New("boom"), StatusUnavailable},
		{context.DeadlineExceeded, StatusTimeout},
		{fmt.Errorf("query: %w", context.Canceled), StatusTimeout},
		{&Error{Status: StatusNotOwner}, StatusNotOwner},
		{fmt.Errorf("x: %w", &Error{Status: StatusClosed}), StatusClosed},
		// An *Error decides even when a context error is in its chain.
		{&Error{Status: StatusUnavailable, Err: context.Canceled}, StatusUnavailable},
	}
	for _, tc := range tests {
		if got := StatusOf(tc.err); got != tc.want {
			t.Errorf("StatusOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestResultErr(t *testing.T) {
	holder := &Lease{Key: Key{Namespace: "ns", Name: "k"}, Owner: "o", Token: 3}
	if err := (Result{Op: OpAcquire, Status: StatusAcquired, Lease: holder}).Err(); err != nil {
		t.Errorf("Result{acquired}.Err() = %v, want nil", err)
	}
	err := Result{Op: OpAcquire, Status: StatusConflict, Lease: holder, Message: "held"}.Err()
	var e *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &e) {
		t.Fatalf("Result{conflict}.Err() = %v, want an *Error matching ErrConflict", err)
	}
	if e.Key != holder.Key || e.Lease != holder || e.Op != OpAcquire || e.Message != "held" {
		t.Errorf("Result{conflict}.Err() = %+v", e)
	}
	err = Result{Op: OpGet, Status: StatusNotFound}.Err()
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Result{not_found}.Err() = %v, want ErrNotFound", err)
	}
}

func TestLeaseLiveAt(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Lease{ExpiresAt: exp}
	if !l.LiveAt(exp.Add(-time.Microsecond)) {
		t.Error("lease not live a microsecond before it expires")
	}
	if l.LiveAt(exp) {
		t.Error("lease live at its expiry instant: live means now < expires_at")
	}
	if l.LiveAt(exp.Add(time.Microsecond)) {
		t.Error("lease live after it expired")
	}
}

func TestErrorTextWithoutOpOrKey(t *testing.T) {
	e := &Error{Status: StatusUnavailable, Message: "schema not migrated"}
	if got, want := e.Error(), "lease: unavailable: schema not migrated"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	e = &Error{Op: OpGet, Key: Key{Namespace: "ns", Name: "k"}, Status: StatusNotFound}
	if got, want := e.Error(), "lease: get ns/k: not_found"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

// newError builds an *Error as a backend would (backendkit.NewError, which
// this package's tests cannot import).
func newError(op Op, status Status, cause error, format string, args ...any) *Error {
	return &Error{Op: op, Status: status, Err: cause, Message: fmt.Sprintf(format, args...)}
}
