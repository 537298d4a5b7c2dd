// Package wire holds the JSON shapes that leasectl prints and the HTTP API
// (package httpapi) sends and receives, as pinned by DESIGN.md: a lease, the
// result of a lease operation, a page of leases, an audit record and a page
// of them; and the conversions from and to the protocol's types. One
// definition serves both, so the CLI's output and the API's bodies cannot
// drift apart.
//
// Times are RFC 3339 in UTC with a fixed six fraction digits (backends keep
// microseconds), so they sort as strings; an unknown time is null.
//
// Like protocol, this package must not import any database driver or any
// package under sqlstore/.
package wire

import (
	"fmt"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/protocol"
)

// TimeLayout is the layout of every time in the JSON shapes.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Lease is a lease in JSON.
type Lease struct {
	Namespace  string  `json:"namespace"`
	Key        string  `json:"key"`
	Owner      string  `json:"owner"`
	Token      int64   `json:"token"`
	AcquiredAt *string `json:"acquired_at"` // null when unknown: a replayed renew has none
	RenewedAt  *string `json:"renewed_at"`
	ExpiresAt  *string `json:"expires_at"` // null when unknown: a replayed release or revoke has none
	Version    int     `json:"version"`
	// LockDelay is the lease's lock-delay in the duration grammar ("15s",
	// "1h30m", "2d"), left out when the lease has none (so the shape of
	// such a lease is as before lock-delays).
	LockDelay string `json:"lock_delay,omitempty"`
}

// Result is the answer of acquire, renew, release, get and revoke. Lease is
// the lease acted on, or on conflict, stale_token and not_owner the current
// one; null when there is none.
type Result struct {
	Status    string `json:"status"`
	Replayed  bool   `json:"replayed"`
	RequestID string `json:"request_id"`
	Message   string `json:"message"`
	Lease     *Lease `json:"lease"`
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// ListPage is the answer of list.
type ListPage struct {
	Status     string  `json:"status"`
	Leases     []Lease `json:"leases"`
	NextCursor string  `json:"next_cursor"`
	Message    string  `json:"message,omitempty"` // set when the list failed
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// Record is an audit record in JSON.
type Record struct {
	ID        int64  `json:"id"`
	At        string `json:"at"`
	Op        string `json:"op"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
	RequestID string `json:"request_id"`
	Actor     string `json:"actor"`
	Reason    string `json:"reason"`
	Status    string `json:"status"`
	Version   int    `json:"version"`
	// ExpiresAt is the lease's expiry after the change (for release and
	// revoke, when it would have expired). The HTTP API sends it; leasectl's
	// output leaves it out (nil), as DESIGN.md's audit shape has no such field.
	ExpiresAt *string `json:"expires_at,omitempty"`
}

// AuditPage is the answer of an audit read.
type AuditPage struct {
	Status     string   `json:"status"`
	Records    []Record `json:"records"`
	NextCursor string   `json:"next_cursor"`
	Message    string   `json:"message,omitempty"` // set when the read failed
	// HeldBack is set on a follower's page that stopped short of committed
	// records (see audit.Page); the HTTP API sends it, leasectl does not.
	HeldBack bool `json:"held_back,omitempty"`
	// FollowCursor is a follower's page's cursor to read on from, past
	// the records it passed over (see audit.Page); the HTTP API sends it,
	// leasectl does not.
	FollowCursor string `json:"follow_cursor,omitempty"`
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// NamespacePage is the answer of the HTTP API's namespace listing and
// leasectl namespaces: the namespaces that hold live leases, in byte order.
type NamespacePage struct {
	Status     string   `json:"status"`
	Namespaces []string `json:"namespaces"`
	Message    string   `json:"message,omitempty"` // set when the listing failed
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// RenewManyPage is the answer of the HTTP API's bulk renew: one result per
// renewal asked, in order. Status is found when the store answered (each
// result has its own status), else the status of why it could not
// (unavailable, timeout, closed; every result then has it too).
type RenewManyPage struct {
	Status  string   `json:"status"`
	Results []Result `json:"results"`
	Message string   `json:"message,omitempty"`
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// Error is the answer of a request that failed outside the shapes above
// (health, authentication, an unknown route), and leasectl's output for a
// command that failed before it had an answer.
type Error struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// NotifyEvent is the data of one event of the HTTP API's notification
// stream (GET /v1/notify/{namespace}/{key}). Status is "subscribed" in the
// first event (the subscription is live; KeepAlive says how often the
// server sends a keep-alive comment, as a Go duration), "signal" when the
// lease at the key may have ended, and in an "end" event, the last of a
// stream the server ends, the status that says why (unavailable, closed,
// timeout).
type NotifyEvent struct {
	Status    string `json:"status"`
	Message   string `json:"message"`
	KeepAlive string `json:"keep_alive,omitempty"`
	// ErrorCode refines a failure's status for programs, left out when
	// it has none: "restart_required" on an unavailable answer of a store
	// that refuses every operation until its process restarts (the HTTP
	// API sends it; leasectl's output leaves it out).
	ErrorCode string `json:"error_code,omitempty"`
}

// FollowPosition is the data of a position event of the HTTP API's audit
// follow stream (GET /v1/audit/follow): the cursor the stream reads on
// from, past records it went over that its query does not select.
type FollowPosition struct {
	Cursor string `json:"cursor"`
}

// Time formats t in [TimeLayout], in UTC.
func Time(t time.Time) string { return t.UTC().Format(TimeLayout) }

// OptTime is [Time], or nil for the zero time.
func OptTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := Time(t)
	return &s
}

// ParseTime reads a time in RFC 3339 (with any number of fraction digits).
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %q is not an RFC 3339 time", field, s)
	}
	return t.UTC(), nil
}

// parseOptTime is ParseTime, or the zero time for nil.
func parseOptTime(field string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	return ParseTime(field, *s)
}

// FromLease returns l in JSON.
func FromLease(l protocol.Lease) Lease {
	return Lease{
		Namespace: l.Key.Namespace, Key: l.Key.Name, Owner: l.Owner, Token: l.Token,
		AcquiredAt: OptTime(l.AcquiredAt), RenewedAt: OptTime(l.RenewedAt), ExpiresAt: OptTime(l.ExpiresAt),
		Version: l.Version, LockDelay: OptDuration(l.LockDelay),
	}
}

// OptDuration formats d in the one duration grammar as users write it
// ("15s", "1h30m", "2d"; durations.Format), or "" for zero.
func OptDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return durations.Format(d)
}

// ParseOptDuration reads a duration field that may be absent ("": zero),
// in the one duration grammar (package durations: 15s, 2m, 1d).
func ParseOptDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := durations.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}

// Protocol returns the lease l describes. A lease of a format version
// other than [protocol.LeaseFormatVersion] is refused naming both, as the
// backends refuse such a row.
func (l Lease) Protocol() (protocol.Lease, error) {
	if l.Version != protocol.LeaseFormatVersion {
		return protocol.Lease{}, fmt.Errorf("version: the lease has format version %d, this release reads only version %d: upgrade leasestore to read it",
			l.Version, protocol.LeaseFormatVersion)
	}
	out := protocol.Lease{Key: protocol.Key{Namespace: l.Namespace, Name: l.Key}, Owner: l.Owner, Token: l.Token, Version: l.Version}
	var err error
	if out.AcquiredAt, err = parseOptTime("acquired_at", l.AcquiredAt); err != nil {
		return protocol.Lease{}, err
	}
	if out.RenewedAt, err = parseOptTime("renewed_at", l.RenewedAt); err != nil {
		return protocol.Lease{}, err
	}
	if out.ExpiresAt, err = parseOptTime("expires_at", l.ExpiresAt); err != nil {
		return protocol.Lease{}, err
	}
	if out.LockDelay, err = ParseOptDuration("lock_delay", l.LockDelay); err != nil {
		return protocol.Lease{}, err
	}
	return out, nil
}

// FromResult returns res in JSON, with msg as its message (leasectl passes
// the message with passwords masked).
func FromResult(res protocol.Result, msg string) Result {
	out := Result{Status: string(res.Status), Replayed: res.Replayed, RequestID: res.RequestID, Message: msg}
	if res.Lease != nil {
		l := FromLease(*res.Lease)
		out.Lease = &l
	}
	return out
}

// Protocol returns the result r describes, for operation op.
func (r Result) Protocol(op protocol.Op) (protocol.Result, error) {
	out := protocol.Result{Op: op, Status: protocol.Status(r.Status), Replayed: r.Replayed, RequestID: r.RequestID, Message: r.Message}
	if r.Lease != nil {
		l, err := r.Lease.Protocol()
		if err != nil {
			return protocol.Result{}, fmt.Errorf("lease: %w", err)
		}
		out.Lease = &l
	}
	return out, nil
}

// FromList returns a successful list in JSON (leases never null).
func FromList(res protocol.ListResult) ListPage {
	out := ListPage{Status: string(res.Status), Leases: make([]Lease, 0, len(res.Leases)), NextCursor: res.NextCursor}
	for _, l := range res.Leases {
		out.Leases = append(out.Leases, FromLease(l))
	}
	return out
}

// Protocol returns the list result p describes.
func (p ListPage) Protocol() (protocol.ListResult, error) {
	out := protocol.ListResult{Status: protocol.Status(p.Status), NextCursor: p.NextCursor, Message: p.Message}
	for i, l := range p.Leases {
		pl, err := l.Protocol()
		if err != nil {
			return protocol.ListResult{}, fmt.Errorf("leases[%d]: %w", i, err)
		}
		out.Leases = append(out.Leases, pl)
	}
	return out, nil
}

// FromRecord returns r in JSON, without expires_at (leasectl's shape).
func FromRecord(r audit.Record) Record {
	return Record{
		ID: r.ID, At: Time(r.At), Op: string(r.Op), Namespace: r.Namespace, Key: r.Key, Owner: r.Owner,
		Token: r.Token, RequestID: r.RequestID, Actor: r.Actor, Reason: r.Reason, Status: string(r.Status),
		Version: r.Version,
	}
}

// Audit returns the record r describes. A record of a format version
// other than [audit.RecordFormatVersion] is refused naming both, as the
// backends refuse such a row, and so is an id below 1 (no cursor resumes
// after it).
func (r Record) Audit() (audit.Record, error) {
	if r.Version != audit.RecordFormatVersion {
		return audit.Record{}, fmt.Errorf("version: the record (id %d) has format version %d, this release reads only version %d: upgrade leasestore to read it",
			r.ID, r.Version, audit.RecordFormatVersion)
	}
	if r.ID < 1 {
		return audit.Record{}, fmt.Errorf("id: %d is not a record id (ids start at 1)", r.ID)
	}
	at, err := ParseTime("at", r.At)
	if err != nil {
		return audit.Record{}, err
	}
	exp, err := parseOptTime("expires_at", r.ExpiresAt)
	if err != nil {
		return audit.Record{}, err
	}
	return audit.Record{
		ID: r.ID, At: at, Op: protocol.Op(r.Op), Namespace: r.Namespace, Key: r.Key, Owner: r.Owner, Token: r.Token,
		RequestID: r.RequestID, Actor: r.Actor, Reason: r.Reason, Status: protocol.Status(r.Status), Version: r.Version,
		ExpiresAt: exp,
	}, nil
}

// FromPage returns a page of the audit trail in JSON (records never null),
// in leasectl's shape: without expires_at and held_back.
func FromPage(p audit.Page) AuditPage {
	out := AuditPage{Status: string(protocol.StatusFound), Records: make([]Record, 0, len(p.Records)), NextCursor: p.NextCursor}
	for _, r := range p.Records {
		out.Records = append(out.Records, FromRecord(r))
	}
	return out
}

// Audit returns the page p describes.
func (p AuditPage) Audit() (audit.Page, error) {
	out := audit.Page{NextCursor: p.NextCursor, HeldBack: p.HeldBack, FollowCursor: p.FollowCursor}
	for i, r := range p.Records {
		ar, err := r.Audit()
		if err != nil {
			return audit.Page{}, fmt.Errorf("records[%d]: %w", i, err)
		}
		out.Records = append(out.Records, ar)
	}
	return out, nil
}
