package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Decode reads data, an answer of the HTTP API, into v (a *Result,
// *ListPage, *AuditPage, *NamespacePage, *RenewManyPage or *Record) as
// json.Unmarshal does, and in the same pass notes the members that v's
// type requires (a field without omitempty, at any depth; a pointer field
// may be null, not absent, as the OpenAPI document requires): absent names
// the first one data lacks, or has null where the OpenAPI document does
// not allow it (a member of a type other than a pointer, an array or an
// array's item), in the order of the type's fields, or is nil.
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
		*out = ListPage{Status: in.Status.v, Leases: wireAll(in.Leases), NextCursor: in.NextCursor.v, Message: in.Message, ErrorCode: in.ErrorCode}
		if err := required("", "status", in.Status.got()); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "leases", in.Leases != nil); err != nil {
			return err, nil
		}
		if err := eachAbsent(in.Leases, "leases"); err != nil {
			return err, nil
		}
		return required("", "next_cursor", in.NextCursor.got()), nil
	case *AuditPage:
		var in auditPageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = AuditPage{Status: in.Status.v, Records: wireAll(in.Records), NextCursor: in.NextCursor.v, Message: in.Message,
			HeldBack: in.HeldBack, FollowCursor: in.FollowCursor, ErrorCode: in.ErrorCode}
		if err := required("", "status", in.Status.got()); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "records", in.Records != nil); err != nil {
			return err, nil
		}
		if err := eachAbsent(in.Records, "records"); err != nil {
			return err, nil
		}
		return required("", "next_cursor", in.NextCursor.got()), nil
	case *NamespacePage:
		var in namespacePageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = NamespacePage{Status: in.Status.v, Namespaces: in.Namespaces, Message: in.Message, ErrorCode: in.ErrorCode}
		if err := required("", "status", in.Status.got()); err != nil {
			return err, nil
		}
		if err := requiredArray(data, "namespaces", in.Namespaces != nil); err != nil {
			return err, nil
		}
		if slices.Contains(in.Namespaces, "") {
			// A null item reads as "" (which no namespace is), so only
			// data tells it from an empty string.
			return nullItem(data, "namespaces"), nil
		}
		return nil, nil
	case *RenewManyPage:
		var in renewManyPageIn
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		*out = RenewManyPage{Status: in.Status.v, Results: wireAll(in.Results), Message: in.Message, ErrorCode: in.ErrorCode}
		if err := required("", "status", in.Status.got()); err != nil {
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
// item (which the OpenAPI document does not allow) is told from an object. TestDecodeMirrors
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
		ErrorCode string           `json:"error_code,omitempty"`
	}
	listPageIn struct {
		Status     member[string] `json:"status"`
		Leases     []*leaseIn     `json:"leases"`
		NextCursor member[string] `json:"next_cursor"`
		Message    string         `json:"message,omitempty"`
		ErrorCode  string         `json:"error_code,omitempty"`
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
		ErrorCode    string         `json:"error_code,omitempty"`
	}
	namespacePageIn struct {
		Status     member[string] `json:"status"`
		Namespaces []string       `json:"namespaces"`
		Message    string         `json:"message,omitempty"`
		ErrorCode  string         `json:"error_code,omitempty"`
	}
	renewManyPageIn struct {
		Status    member[string] `json:"status"`
		Results   []*resultIn    `json:"results"`
		Message   string         `json:"message,omitempty"`
		ErrorCode string         `json:"error_code,omitempty"`
	}
)

func (l *leaseIn) wire() Lease {
	if l == nil {
		return Lease{}
	}
	return Lease{Namespace: l.Namespace.v, Key: l.Key.v, Owner: l.Owner.v, Token: l.Token.v, AcquiredAt: l.AcquiredAt.v,
		RenewedAt: l.RenewedAt.v, ExpiresAt: l.ExpiresAt.v, Version: l.Version.v, LockDelay: l.LockDelay}
}

func (l *leaseIn) null() bool { return l == nil }

func (l *leaseIn) absent(path string) error {
	if l == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		got  presence
	}{
		{"namespace", l.Namespace.got()}, {"key", l.Key.got()}, {"owner", l.Owner.got()}, {"token", l.Token.got()},
		{"acquired_at", l.AcquiredAt.got()}, {"renewed_at", l.RenewedAt.got()}, {"expires_at", l.ExpiresAt.got()},
		{"version", l.Version.got()},
	} {
		if err := required(path, m.name, m.got); err != nil {
			return err
		}
	}
	return nil
}

func (r *resultIn) wire() Result {
	if r == nil {
		return Result{}
	}
	out := Result{Status: r.Status.v, Replayed: r.Replayed.v, RequestID: r.RequestID.v, Message: r.Message.v, ErrorCode: r.ErrorCode}
	if r.Lease.v != nil {
		l := r.Lease.v.wire()
		out.Lease = &l
	}
	return out
}

func (r *resultIn) null() bool { return r == nil }

func (r *resultIn) absent(path string) error {
	if r == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		got  presence
	}{
		{"status", r.Status.got()}, {"replayed", r.Replayed.got()}, {"request_id", r.RequestID.got()},
		{"message", r.Message.got()}, {"lease", r.Lease.got()},
	} {
		if err := required(path, m.name, m.got); err != nil {
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

func (r *recordIn) null() bool { return r == nil }

func (r *recordIn) absent(path string) error {
	if r == nil {
		return nil
	}
	for _, m := range [...]struct {
		name string
		got  presence
	}{
		{"id", r.ID.got()}, {"at", r.At.got()}, {"op", r.Op.got()}, {"namespace", r.Namespace.got()}, {"key", r.Key.got()},
		{"owner", r.Owner.got()}, {"token", r.Token.got()}, {"request_id", r.RequestID.got()}, {"actor", r.Actor.got()},
		{"reason", r.Reason.got()}, {"status", r.Status.got()}, {"version", r.Version.got()},
	} {
		if err := required(path, m.name, m.got); err != nil {
			return err
		}
	}
	return nil
}

// eachAbsent is the first absent member of items, whose paths are
// path[i], or the first null item (an object of the array: the OpenAPI
// document allows no null there).
func eachAbsent[T interface {
	absent(string) error
	null() bool
}](items []T, path string) error {
	for i, item := range items {
		at := path + "[" + strconv.Itoa(i) + "]"
		if item.null() {
			return fmt.Errorf("%s is null", at)
		}
		if err := item.absent(at); err != nil {
			return err
		}
	}
	return nil
}

// presence is how a required member appeared in an object.
type presence uint8

const (
	present    presence = iota // with a value (null, for a nullable member)
	missing                    // not at all
	nullNotNil                 // as null, which the OpenAPI document does not allow for it
)

// required is the error naming member name of the object at path when it
// is missing, or null though not nullable (json.Unmarshal leaves such a
// member zero, as it leaves a missing one).
func required(path, name string, got presence) error {
	var err error
	switch got {
	case present:
		return nil
	case missing:
		err = fmt.Errorf("no field %q", name)
	default:
		err = fmt.Errorf("field %q is null", name)
	}
	if path == "" {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// requiredArray is [required] of member name of the object data, which
// holds an array that Decode decoded into a slice: one that is not nil
// appeared; a nil one was null or absent, which only data tells (the
// slice is empty then, so reading the object's members again costs
// little). An array is not nullable.
func requiredArray(data []byte, name string, notNil bool) error {
	got := present
	if !notNil {
		got = missing
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) == nil {
			if raw, ok := members[name]; ok {
				got = nullNotNil
				if string(raw) != "null" {
					got = present // [] (json.Unmarshal makes it an empty slice, not nil)
				}
			}
		}
	}
	return required("", name, got)
}

// nullItem is the error naming the first null item of the array member
// name of the object data (see [eachAbsent]), nil when it has none.
func nullItem(data []byte, name string) error {
	var members map[string]json.RawMessage
	var items []json.RawMessage
	if json.Unmarshal(data, &members) != nil || json.Unmarshal(members[name], &items) != nil {
		return nil
	}
	for i, item := range items {
		if string(item) == "null" {
			return fmt.Errorf("%s[%d] is null", name, i)
		}
	}
	return nil
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
// (null included), badNull that it appeared as null though T is not a
// pointer (the OpenAPI document's nullable members are the shapes'
// pointers). It decodes as json.Unmarshal decodes v, taking the common
// literals (a string without escapes, an integer, a boolean) without
// calling it.
type member[T any] struct {
	v       T
	set     bool
	badNull bool
}

// UnmarshalJSON implements [json.Unmarshaler].
func (m *member[T]) UnmarshalJSON(b []byte) error {
	m.set = true
	m.badNull = false
	if literal(b, &m.v) {
		return nil
	}
	if string(b) == "null" {
		m.badNull = reflect.TypeFor[T]().Kind() != reflect.Pointer
	}
	return json.Unmarshal(b, &m.v)
}

// got is how m appeared.
func (m *member[T]) got() presence {
	switch {
	case !m.set:
		return missing
	case m.badNull:
		return nullNotNil
	}
	return present
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
