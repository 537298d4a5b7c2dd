package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Decode reads data, an answer of the HTTP API, into v (a *Result,
// *ListPage, *AuditPage, *NamespacePage, *RenewManyPage or *Record) as
// json.Unmarshal does, and in the same pass notes the members that v's
// type requires (a field without omitempty, at any depth; a pointer field
// may be null, not absent, as the OpenAPI document requires): absent names
// the first one data lacks, in the order of the type's fields, or is nil.
// json.Unmarshal would leave such a field zero, as though the sender had
// sent a fencing token 0 or an empty owner; the caller refuses the answer
// once its status said it should have the shape (an error's answer has
// only status and message). err is json's, or names a type this function
// does not read; v is then left as it was. A member is matched as
// json.Unmarshal matches it; members the type does not have (a newer
// sender's) are not looked at.
func Decode(data []byte, v any) (absent, err error) {
	switch v.(type) {
	case *Result, *Record, *ListPage, *AuditPage, *NamespacePage, *RenewManyPage:
	default:
		return nil, fmt.Errorf("wire: Decode does not read a %T", v)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil // no object, which json.Unmarshal leaves v as it was for: nothing to require
	}
	switch out := v.(type) {
	case *Result:
		var in resultIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = in.wire()
		return in.absent(""), nil
	case *Record:
		var in recordIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = in.wire()
		return in.absent(""), nil
	case *ListPage:
		var in listPageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = ListPage{Status: in.Status.v, Leases: wireAll(in.Leases), NextCursor: in.NextCursor.v, Message: in.Message}
		if err := required("", "status", in.Status.set); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "leases", in.Leases != nil); err != nil {
			return err, nil
		}
		if err := eachAbsent(in.Leases, "leases"); err != nil {
			return err, nil
		}
		return required("", "next_cursor", in.NextCursor.set), nil
	case *AuditPage:
		var in auditPageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = AuditPage{Status: in.Status.v, Records: wireAll(in.Records), NextCursor: in.NextCursor.v, Message: in.Message,
			HeldBack: in.HeldBack, FollowCursor: in.FollowCursor}
		if err := required("", "status", in.Status.set); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "records", in.Records != nil); err != nil {
			return err, nil
		}
		if err := eachAbsent(in.Records, "records"); err != nil {
			return err, nil
		}
		return required("", "next_cursor", in.NextCursor.set), nil
	case *NamespacePage:
		var in namespacePageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = NamespacePage{Status: in.Status.v, Namespaces: in.Namespaces, Message: in.Message}
		if err := required("", "status", in.Status.set); err != nil {
			return err, nil
		}
		return requiredArray(data, "namespaces", in.Namespaces != nil), nil
	case *RenewManyPage:
		var in renewManyPageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = RenewManyPage{Status: in.Status.v, Results: wireAll(in.Results), Message: in.Message}
		if err := required("", "status", in.Status.set); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "results", in.Results != nil); err != nil {
			return err, nil
		}
		return eachAbsent(in.Results, "results"), nil
	}
	panic(fmt.Sprintf("wire: Decode of a %T", v)) // unreachable: refused above
}

// The types below mirror the shapes above for Decode: each required
// member is a [member], which records that it appeared; optional members
// are as in the shape. A slice of objects holds pointers, so that a null
// item (which requires nothing) is told from an object. TestDecodeMirrors
// checks that they have the shapes' members.
type (
	leaseIn struct {
		Namespace  member[string]  `json:"namespace"`
		Key        member[string]  `json:"key"`
		Owner      member[string]  `json:"owner"`
		Token      member[int64]   `json:"token"`
		AcquiredAt member[*string] `json:"acquired_at"`
		RenewedAt  member[*string] `json:"renewed_at"`
		ExpiresAt  member[*string] `json:"expires_at"`
		Version    member[int]     `json:"version"`
		LockDelay  string          `json:"lock_delay,omitempty"`
	}
	resultIn struct {
		Status    member[string]   `json:"status"`
		Replayed  member[bool]     `json:"replayed"`
		RequestID member[string]   `json:"request_id"`
		Message   member[string]   `json:"message"`
		Lease     member[*leaseIn] `json:"lease"`
	}
	listPageIn struct {
		Status     member[string] `json:"status"`
		Leases     []*leaseIn     `json:"leases"`
		NextCursor member[string] `json:"next_cursor"`
		Message    string         `json:"message,omitempty"`
	}
	recordIn struct {
		ID        member[int64]  `json:"id"`
		At        member[string] `json:"at"`
		Op        member[string] `json:"op"`
		Namespace member[string] `json:"namespace"`
		Key       member[string] `json:"key"`
		Owner     member[string] `json:"owner"`
		Token     member[int64]  `json:"token"`
		RequestID member[string] `json:"request_id"`
		Actor     member[string] `json:"actor"`
		Reason    member[string] `json:"reason"`
		Status    member[string] `json:"status"`
		Version   member[int]    `json:"version"`
		ExpiresAt *string        `json:"expires_at,omitempty"`
	}
	auditPageIn struct {
		Status       member[string] `json:"status"`
		Records      []*recordIn    `json:"records"`
		NextCursor   member[string] `json:"next_cursor"`
		Message      string         `json:"message,omitempty"`
		HeldBack     bool           `json:"held_back,omitempty"`
		FollowCursor string         `json:"follow_cursor,omitempty"`
	}
	namespacePageIn struct {
		Status     member[string] `json:"status"`
		Namespaces []string       `json:"namespaces"`
		Message    string         `json:"message,omitempty"`
	}
	renewManyPageIn struct {
		Status  member[string] `json:"status"`
		Results []*resultIn    `json:"results"`
		Message string         `json:"message,omitempty"`
	}
)

func (l *leaseIn) wire() Lease {
	if l == nil {
		return Lease{}
	}
	return Lease{Namespace: l.Namespace.v, Key: l.Key.v, Owner: l.Owner.v, Token: l.Token.v, AcquiredAt: l.AcquiredAt.v,
		RenewedAt: l.RenewedAt.v, ExpiresAt: l.ExpiresAt.v, Version: l.Version.v, LockDelay: l.LockDelay}
}

func (l *leaseIn) absent(path string) error {
	if l == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		set  bool
	}{
		{"namespace", l.Namespace.set}, {"key", l.Key.set}, {"owner", l.Owner.set}, {"token", l.Token.set},
		{"acquired_at", l.AcquiredAt.set}, {"renewed_at", l.RenewedAt.set}, {"expires_at", l.ExpiresAt.set},
		{"version", l.Version.set},
	} {
		if err := required(path, m.name, m.set); err != nil {
			return err
		}
	}
	return nil
}

func (r *resultIn) wire() Result {
	if r == nil {
		return Result{}
	}
	out := Result{Status: r.Status.v, Replayed: r.Replayed.v, RequestID: r.RequestID.v, Message: r.Message.v}
	if r.Lease.v != nil {
		l := r.Lease.v.wire()
		out.Lease = &l
	}
	return out
}

func (r *resultIn) absent(path string) error {
	if r == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		set  bool
	}{
		{"status", r.Status.set}, {"replayed", r.Replayed.set}, {"request_id", r.RequestID.set},
		{"message", r.Message.set}, {"lease", r.Lease.set},
	} {
		if err := required(path, m.name, m.set); err != nil {
			return err
		}
	}
	return r.Lease.v.absent(join(path, "lease"))
}

func (r *recordIn) wire() Record {
	if r == nil {
		return Record{}
	}
	return Record{ID: r.ID.v, At: r.At.v, Op: r.Op.v, Namespace: r.Namespace.v, Key: r.Key.v, Owner: r.Owner.v,
		Token: r.Token.v, RequestID: r.RequestID.v, Actor: r.Actor.v, Reason: r.Reason.v, Status: r.Status.v,
		Version: r.Version.v, ExpiresAt: r.ExpiresAt}
}

func (r *recordIn) absent(path string) error {
	if r == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		set  bool
	}{
		{"id", r.ID.set}, {"at", r.At.set}, {"op", r.Op.set}, {"namespace", r.Namespace.set}, {"key", r.Key.set},
		{"owner", r.Owner.set}, {"token", r.Token.set}, {"request_id", r.RequestID.set}, {"actor", r.Actor.set},
		{"reason", r.Reason.set}, {"status", r.Status.set}, {"version", r.Version.set},
	} {
		if err := required(path, m.name, m.set); err != nil {
			return err
		}
	}
	return nil
}

// eachAbsent is the first absent member of items, whose paths are
// path[i].
func eachAbsent[T interface{ absent(string) error }](items []T, path string) error {
	for i, item := range items {
		if err := item.absent(path + "[" + strconv.Itoa(i) + "]"); err != nil {
			return err
		}
	}
	return nil
}

// required is the error naming member name of the object at path when
// set is false.
func required(path, name string, set bool) error {
	switch {
	case set:
		return nil
	case path == "":
		return fmt.Errorf("no field %q", name)
	}
	return fmt.Errorf("%s: no field %q", path, name)
}

// requiredArray is [required] of member name of the object data, which
// holds an array that Decode decoded into a slice: one that is not nil
// appeared; a nil one was null or absent, which only data tells (the
// slice is empty then, so reading the object's members again costs
// little).
func requiredArray(data []byte, name string, notNil bool) error {
	if !notNil {
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) == nil {
			_, notNil = members[name]
		}
	}
	return required("", name, notNil)
}

// wireAll is the shapes of items, nil for nil.
func wireAll[T any, In interface{ wire() T }](items []In) []T {
	if items == nil {
		return nil
	}
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = item.wire()
	}
	return out
}

// join is the path of member name of the object at path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// member is a required member of an object: set records that it appeared
// (null included). It decodes as json.Unmarshal decodes v, taking the
// common literals (a string without escapes, an integer, a boolean)
// without calling it.
type member[T any] struct {
	v   T
	set bool
}

// UnmarshalJSON implements [json.Unmarshaler].
func (m *member[T]) UnmarshalJSON(b []byte) error {
	m.set = true
	if literal(b, &m.v) {
		return nil
	}
	return json.Unmarshal(b, &m.v)
}

// literal decodes b into v, as json.Unmarshal would, when b is a literal
// it takes (see member) and v a *string, **string, *int64, *int or *bool;
// it reports whether it did.
func literal(b []byte, v any) bool {
	switch v := v.(type) {
	case *string:
		s, ok := plainString(b)
		if ok {
			*v = s
		}
		return ok
	case **string:
		s, ok := plainString(b)
		if ok {
			*v = &s
		}
		return ok
	case *int64:
		n, ok := integer(b, 64)
		if ok {
			*v = n
		}
		return ok
	case *int:
		n, ok := integer(b, strconv.IntSize)
		if ok {
			*v = int(n)
		}
		return ok
	case *bool:
		switch string(b) {
		case "true":
			*v = true
			return true
		case "false":
			*v = false
			return true
		}
	}
	return false
}

// plainString is the JSON string literal b when it holds no escape and is
// valid UTF-8 (which json.Unmarshal would take as it is).
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	s := b[1 : len(b)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// integer is the JSON number literal b when it is an integer that fits in
// bits (which json.Unmarshal would take as strconv.ParseInt does).
func integer(b []byte, bits int) (int64, bool) {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, bits)
	return n, err == nil
}
