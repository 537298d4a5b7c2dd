// Package audit holds leasestore's audit record type, the interface for
// reading a store's append-only audit trail with filters and keyset
// pagination, and audit hooks that copy state changes to other sinks.
//
// The durable trail is written by each backend in the same atomic step as
// the state change it records; this package only reads it and describes it.
// [Watch] streams the changes of a key or a namespace as they commit.
// It must not import any database driver or any package under sqlstore/.
package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// RecordFormatVersion is the serialization version of [Record] written by
// this release. Backends refuse audit rows of any other version.
const RecordFormatVersion = 1

// Page sizes for [Query].
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Record is one entry of the audit trail: a state change that took effect,
// or a prune (Op [OpPrune], Status [StatusPruned]). Records are never
// updated, and leave the trail only through retention ([Pruner]): the SQL
// databases refuse any other update or delete, and on etcd, which cannot
// refuse a write, each record carries a checksum that shows one.
type Record struct {
	ID        int64           `json:"id"`         // unique and increasing within one store (see Reader on ordering)
	At        time.Time       `json:"at"`         // the backend's clock when the change took effect
	Op        protocol.Op     `json:"op"`         // acquire, renew, release, revoke or prune
	Namespace string          `json:"namespace"`  //
	Key       string          `json:"key"`        // the key's name within Namespace
	Owner     string          `json:"owner"`      // the lease's owner
	Token     int64           `json:"token"`      // the lease's fencing token
	RequestID string          `json:"request_id"` //
	Actor     string          `json:"actor"`      // who asked: the owner, or the revoking operator
	Reason    string          `json:"reason"`     // revoke's reason; "" otherwise
	Status    protocol.Status `json:"status"`     // acquired, renewed, released, revoked or pruned
	Version   int             `json:"version"`    // RecordFormatVersion
	ExpiresAt time.Time       `json:"-"`          // the lease's expiry after the change; for release and revoke, when it would have expired (zero in records written before schema version 2)
}

// Query filters and pages the audit trail. The zero Query reads the first
// [DefaultLimit] records of every namespace, oldest first. The filters
// combine with AND; each one left at its zero value selects everything.
type Query struct {
	Namespace string    // "" for every namespace
	Key       string    // a key name; requires Namespace
	Since     time.Time // records at or after this time; zero for all
	// Ops keeps only the records of these operations: any of [RecordedOps]
	// (acquire, renew, release, revoke, prune), each at most once. Nil or
	// empty keeps every operation; an op the trail never records is
	// invalid, and the error names the ones it does.
	Ops []protocol.Op
	// Owner keeps only the records whose Owner is exactly this (the
	// lease's owner, not the actor: a revoke's record carries the owner
	// whose lease was revoked). "" keeps every owner.
	Owner  string
	Limit  int    // 0 means DefaultLimit; at most MaxLimit
	Cursor string // NextCursor of the previous page, read in the same order (see Newest)
	// Newest pages from the newest record backwards: a page holds the
	// newest records that match, newest first, and its NextCursor goes on
	// to older ones. The default (false) is oldest first. A cursor keeps
	// its order: one from an oldest-first page given to a newest-first
	// query, or the other way round, is invalid. Newest with Follow is
	// invalid: a follower reads forwards.
	Newest bool
	// Follow asks for a follower's read: records that may still gain a
	// predecessor with a smaller id are held back, so paging by cursor
	// never skips one, at the price of lagging writers in flight. Without
	// it a read returns what is committed, the caller's own writes included.
	// Only PostgreSQL needs it; other backends commit in id order.
	Follow bool
}

// RecordedOps are the operations the audit trail records, in the order
// [Query.Validate] names them.
var RecordedOps = []protocol.Op{protocol.OpAcquire, protocol.OpRenew, protocol.OpRelease, protocol.OpRevoke, OpPrune}

// ParseOps reads a comma-separated list of operations ("acquire,renew"),
// as the CLI's --op and the HTTP API's op parameter take it; spaces
// around an op are ignored, "" is no filter (nil). Unknown and repeated
// ops are left to [Query.Validate].
func ParseOps(s string) []protocol.Op {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var ops []protocol.Op
	for _, o := range strings.Split(s, ",") {
		ops = append(ops, protocol.Op(strings.TrimSpace(o)))
	}
	return ops
}

// FormatOps is the inverse of [ParseOps]: the ops joined by commas.
func FormatOps(ops []protocol.Op) string {
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = string(o)
	}
	return strings.Join(parts, ",")
}

// Matches tells whether rec passes q's filters (namespace, key, since, ops
// and owner; not the cursor): what a backend that scans the trail, rather
// than asking a database to filter it, keeps.
func (q Query) Matches(rec Record) bool {
	switch {
	case q.Namespace != "" && rec.Namespace != q.Namespace,
		q.Key != "" && rec.Key != q.Key,
		!q.Since.IsZero() && rec.At.Before(q.Since),
		q.Owner != "" && rec.Owner != q.Owner,
		len(q.Ops) > 0 && !slices.Contains(q.Ops, rec.Op):
		return false
	}
	return true
}

// Page is one page of records, in the query's order (oldest first unless
// [Query.Newest]), and the cursor of the next page ("" when there are no
// more records at the time of reading; a follower keeps its last cursor and
// asks again).
type Page struct {
	Records    []Record
	NextCursor string
	// HeldBack is set on a follower's page (Query.Follow) that stopped
	// short of records already committed, because a transaction that began
	// before them is still in progress (on PostgreSQL: any transaction of
	// the cluster). They come in a later page once it ends; a follower that
	// keeps seeing HeldBack is waiting on a long-running transaction.
	HeldBack bool
	// FollowCursor is set on a follower's page (Query.Follow) by backends
	// that tell how far the read went: the cursor a follower reads on
	// from. On a full page it is NextCursor; on the last page it lies
	// past every record the read passed over, those that q does not
	// select (other keys', ops', owners') included, and never past a record
	// a later read may still return (on PostgreSQL, below the records held
	// back). Reading on from it rather than from the last record keeps a
	// filtered follower ahead of a prune of the records it passed over,
	// which would otherwise leave its cursor behind the prune
	// ([ErrPruned]) although it missed nothing. See [Page.Resume].
	FollowCursor string
}

// Resume returns the cursor a follower that read p from cursor reads on
// from: p.FollowCursor when set, else the cursor after p's last record,
// else cursor.
func (p Page) Resume(cursor string) string {
	switch {
	case p.FollowCursor != "":
		return p.FollowCursor
	case len(p.Records) > 0:
		return EncodeCursor(p.Records[len(p.Records)-1].ID)
	}
	return cursor
}

// Reader reads a store's audit trail, ordered by record id. Every backend
// implements it (SQLite, PostgreSQL, etcd, the in-memory one, and
// httpapi.Client over a served store); [RuntimeReader] reads through a
// protocol.Runtime. Implementations are safe for concurrent use.
//
// Ids are assigned when a record is written. On SQLite writers are
// serialized, so ids follow commit order. On PostgreSQL two concurrent
// writers may commit out of id order for a moment (the changes of one key
// always commit in id order); a PostgreSQL Reader given [Query.Follow]
// reads only below the oldest transaction still in progress, so that a
// follower paging by cursor never skips a record, on a primary or a hot
// standby.
type Reader interface {
	ReadAudit(ctx context.Context, q Query) (Page, error)
}

// Validate checks q, cursor included.
func (q Query) Validate() error {
	var errs []error
	if q.Namespace != "" {
		errs = append(errs, textfield.Validate("namespace", q.Namespace, protocol.MaxNamespaceLen))
	}
	if q.Key != "" {
		if q.Namespace == "" {
			errs = append(errs, errors.New("audit: a key filter needs a namespace"))
		}
		errs = append(errs, textfield.Validate("key", q.Key, protocol.MaxNameLen))
	}
	if q.Owner != "" {
		errs = append(errs, textfield.Validate("owner", q.Owner, protocol.MaxOwnerLen))
	}
	for i, op := range q.Ops {
		switch {
		case !slices.Contains(RecordedOps, op):
			errs = append(errs, fmt.Errorf("op: %q is not an operation the audit trail records (%s)", op, FormatOps(RecordedOps)))
		case slices.Contains(q.Ops[:i], op):
			errs = append(errs, fmt.Errorf("op: %q is given twice", op))
		}
	}
	if q.Newest && q.Follow {
		errs = append(errs, errors.New("audit: a follower reads oldest first: newest first cannot be followed"))
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		errs = append(errs, fmt.Errorf("limit: %d is outside [0, %d]", q.Limit, MaxLimit))
	}
	if _, _, err := q.IDRange(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// IDRange returns the record ids a page of q may hold, after < id <
// before, from its cursor and order: oldest first, after is the cursor's
// id (0 without one) and before is [math.MaxInt64]; newest first, after is
// 0 and before is the cursor's id ([math.MaxInt64] without one). A cursor
// of the other order, or none at all, is an error.
func (q Query) IDRange() (after, before int64, err error) {
	if q.Cursor == "" {
		return 0, math.MaxInt64, nil
	}
	newest := strings.HasPrefix(q.Cursor, newestCursorPrefix)
	switch {
	case newest && !q.Newest:
		return 0, 0, errors.New("cursor: from a newest-first page; read it newest first")
	case !newest && q.Newest && strings.HasPrefix(q.Cursor, cursorPrefix):
		return 0, 0, errors.New("cursor: from an oldest-first page; read it oldest first")
	case newest:
		id, err := parseCursorID(strings.TrimPrefix(q.Cursor, newestCursorPrefix))
		return 0, id, err
	}
	id, err := DecodeCursor(q.Cursor)
	return id, math.MaxInt64, err
}

// SinceMicro returns Since rounded up to the microsecond: the first time a
// backend that keeps microseconds (the SQL backends) can store at or after
// Since, so that its "at >= SinceMicro()" keeps exactly what [Query.Matches]
// keeps (a record stamped at 10µs is before a Since of 10.5µs). The zero
// time stays zero.
func (q Query) SinceMicro() time.Time {
	t := q.Since.Truncate(time.Microsecond)
	if t.Before(q.Since) {
		t = t.Add(time.Microsecond)
	}
	return t
}

// EffectiveLimit returns Limit, or [DefaultLimit] when Limit is zero.
func (q Query) EffectiveLimit() int {
	if q.Limit == 0 {
		return DefaultLimit
	}
	return q.Limit
}

// Cursor prefixes: an oldest-first page's cursor resumes after its id, a
// newest-first page's before it.
const (
	cursorPrefix       = "a1."
	newestCursorPrefix = "a1n."
)

// EncodeCursor returns the cursor that resumes after the record with id,
// oldest first.
func EncodeCursor(id int64) string { return cursorPrefix + strconv.FormatInt(id, 10) }

// EncodePrunedCursor returns the cursor that resumes after the record with
// id, oldest first, as [EncodeCursor], carrying prunedBy: the id of the
// last prune batch that had removed records anywhere in the trail when the
// cursor was issued, read in the same snapshot as the page
// ("a1.ID.PRUNEDBY"; 0 when no batch had marked one). A backend issues it
// for a follower whose position lies below the greatest id a prune removed
// although it missed nothing (on PostgreSQL, the horizon of a cluster
// whose oldest transaction predates the prune), so that reading on from
// it is refused only when a prune batch ran since (see [CheckPrunedBy]).
// A batch's id never repeats, so no later batch matches it.
func EncodePrunedCursor(id, prunedBy int64) string {
	return EncodeCursor(id) + "." + strconv.FormatInt(prunedBy, 10)
}

// CursorPrunedBy returns the prune batch's id an oldest-first cursor from
// [EncodePrunedCursor] carries; ok is false for any other cursor (one from
// [EncodeCursor], a newest-first one, "" or a malformed one).
func CursorPrunedBy(c string) (prunedBy int64, ok bool) {
	_, prunedBy, marked, err := decodeCursor(c)
	return prunedBy, err == nil && marked
}

// EncodeNewestCursor returns the cursor that resumes before the record
// with id, newest first ([Query.Newest]).
func EncodeNewestCursor(id int64) string { return newestCursorPrefix + strconv.FormatInt(id, 10) }

// NextCursor returns the cursor that resumes q's order after the record
// with id: [EncodeCursor] or, for [Query.Newest], [EncodeNewestCursor].
func (q Query) NextCursor(id int64) string {
	if q.Newest {
		return EncodeNewestCursor(id)
	}
	return EncodeCursor(id)
}

// IsNewestCursor tells whether c is a newest-first page's cursor (from
// [EncodeNewestCursor]), so that a caller can read it in its order.
func IsNewestCursor(c string) bool { return strings.HasPrefix(c, newestCursorPrefix) }

// CheckCursorEnd returns an invalid-input error for a read of q, oldest
// first from a cursor, when the cursor's id is above end: the greatest id
// a record of this store can have had when the read began (SQLite: the
// last id given; PostgreSQL: below the next transaction's; etcd: the
// revision read), at or above every cursor the store issued. Such a
// cursor was made by another store (or by hand): a follower from it would
// skip every record until the trail caught up with it. A cursor at the end
// is valid. end < 0 checks nothing (a hot standby, which may lag the
// primary that issued the cursor).
func CheckCursorEnd(q Query, end int64) error {
	if q.Newest || q.Cursor == "" || end < 0 {
		return nil
	}
	after, err := DecodeCursor(q.Cursor)
	if err != nil || after <= end {
		return nil
	}
	return &protocol.Error{Op: protocol.OpAudit, Status: protocol.StatusInvalid,
		Message: fmt.Sprintf("cursor %s is past the end of this store's audit trail (no record has an id above %d): "+
			"was it made by another store? Start again without a cursor, with --since (since=), or from the end of the trail", q.Cursor, end)}
}

// DecodeCursor returns the record id an oldest-first cursor from
// [EncodeCursor] or [EncodePrunedCursor] resumes after. A newest-first
// cursor is an error (see [Query.IDRange], which reads both).
func DecodeCursor(c string) (int64, error) {
	id, _, _, err := decodeCursor(c)
	return id, err
}

// decodeCursor reads an oldest-first cursor: its id and, when it carries
// one (marked), its prune batch's id ([EncodePrunedCursor]).
func decodeCursor(c string) (id, prunedBy int64, marked bool, err error) {
	if strings.HasPrefix(c, newestCursorPrefix) {
		return 0, 0, false, errors.New("cursor: from a newest-first page; read it newest first")
	}
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	if !ok {
		return 0, 0, false, errors.New("cursor: not an audit cursor")
	}
	rest, batch, marked := strings.Cut(rest, ".")
	if id, err = parseCursorID(rest); err == nil && marked {
		prunedBy, err = parseCursorID(batch)
	}
	if err != nil {
		return 0, 0, false, err
	}
	return id, prunedBy, marked, nil
}

// parseCursorID reads the id of a cursor, its prefix removed.
func parseCursorID(rest string) (int64, error) {
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
		return 0, errors.New("cursor: malformed")
	}
	return id, nil
}

// RuntimeReader returns a [Reader] of the trail of rt's backend that reads
// through rt ([protocol.Runtime.Do] as [protocol.OpAudit]): with rt's
// default deadline, answering closed once rt is closed, and seen by rt's
// observer. A query that fails [Query.Validate] is invalid and never
// reaches the backend; a backend that keeps no trail answers unavailable.
// The reader is safe for concurrent use and owns nothing.
func RuntimeReader(rt *protocol.Runtime) Reader { return runtimeReader{rt} }

type runtimeReader struct{ rt *protocol.Runtime }

func (r runtimeReader) ReadAudit(ctx context.Context, q Query) (Page, error) {
	if err := q.Validate(); err != nil {
		return Page{}, &protocol.Error{Op: protocol.OpAudit, Status: protocol.StatusInvalid, Message: "bad query", Err: err}
	}
	var page Page
	err := r.rt.Do(ctx, protocol.OpAudit, func(ctx context.Context, b protocol.Backend) error {
		ar, ok := b.(Reader)
		if !ok {
			return &protocol.Error{Op: protocol.OpAudit, Status: protocol.StatusUnavailable,
				Message: fmt.Sprintf("the %s store keeps no audit trail", b.Name())}
		}
		var err error
		page, err = ar.ReadAudit(ctx, q)
		return err
	})
	return page, err
}

// follower returns the runtime's backend as a [Follower], when it is one:
// the follow then reaches the backend without the runtime, whose deadline
// would end it. Asking runs no operation (the observer hears of none).
func (r runtimeReader) follower() (Follower, bool) {
	f, ok := r.rt.Backend().(Follower)
	return f, ok
}
