// Package sqlstore holds the plumbing that leasestore's SQL dialects share:
// the names of the database objects, format-version checks for rows read
// back, the shape of an audit row as the idempotency look-up reads it,
// rebuilding a replayed [protocol.Result] from that row, and assembling
// keyset-paginated pages.
//
// SQL text is not shared: every statement of a dialect lives in that
// dialect's package (sqlstore/postgres, sqlstore/sqlite). This package must
// not import any database driver; it depends only on protocol and audit.
// Everything in it is a pure function or a constant, safe for concurrent use.
package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// Names of the database objects both dialects create (DESIGN.md).
const (
	LeasesTable = "leasestore_leases"
	AuditTable  = "leasestore_audit"
)

// CheckLeaseVersion returns nil when v, the version column of a row of
// [LeasesTable], is [protocol.LeaseFormatVersion], and otherwise an
// *[protocol.Error] with status unavailable naming the table, the version
// found and the version supported. op is the operation that read the row.
func CheckLeaseVersion(op protocol.Op, v int) error {
	return checkVersion(op, LeasesTable, v, protocol.LeaseFormatVersion)
}

// CheckRecordVersion is [CheckLeaseVersion] for a row of [AuditTable] and
// [audit.RecordFormatVersion].
func CheckRecordVersion(op protocol.Op, v int) error {
	return checkVersion(op, AuditTable, v, audit.RecordFormatVersion)
}

func checkVersion(op protocol.Op, table string, found, supported int) error {
	if found == supported {
		return nil
	}
	return protocol.NewError(op, protocol.StatusUnavailable, nil,
		"%s: a row has format version %d, this release supports only version %d: upgrade leasestore to read it",
		table, found, supported)
}

// ServesSchema reports whether a release whose newest migration is want
// can serve a schema at version found: the same version, or a newer one
// whose leasestore_compat row says releases from oldestServing on can (a
// rolling deploy migrates before the binaries roll). oldestServing is 0
// when the schema has no such row.
func ServesSchema(found, oldestServing, want int64) bool {
	return found == want || (found > want && oldestServing > 0 && want >= oldestServing)
}

// SchemaVersionError returns the error a backend gives when the schema is
// not at the version this release needs: found is the applied migration
// version (0 when none was applied, or the version table is missing), want
// is migrations.LatestVersion, where names the database for the message
// ("sqlite database \"/var/lib/x.db\"", "postgres schema \"leases\"").
// The error is an *[protocol.Error] with status unavailable that says how to
// migrate: `leasectl migrate up`, or migrations.Up for library users.
func SchemaVersionError(found, want int64, where string) *protocol.Error {
	switch {
	case found == 0:
		return protocol.NewError("", protocol.StatusUnavailable, nil,
			"%s has no leasestore schema: run `leasectl migrate up` (or call migrations.Up) first", where)
	case found < want:
		return protocol.NewError("", protocol.StatusUnavailable, nil,
			"%s has leasestore schema version %d, this release needs %d: run `leasectl migrate up` (or call migrations.Up)",
			where, found, want)
	default:
		return protocol.NewError("", protocol.StatusUnavailable, nil,
			"%s has leasestore schema version %d, newer than the %d this release knows, and releases older than "+
				"its own cannot serve it: upgrade leasestore",
			where, found, want)
	}
}

// Recorded is an audit row as the idempotency look-up reads it: the public
// [audit.Record], the fingerprint of the request that wrote it, and the
// lease's other times as the operation answered them.
type Recorded struct {
	audit.Record
	ParamsHash string    // the request's Fingerprint()
	AcquiredAt time.Time // the lease's acquired_at (zero in records written before schema version 2)
	RenewedAt  time.Time // the lease's renewed_at (zero in records written before schema version 2)
}

// NewRecorded returns the audit row for a state change that took effect at
// at (the backend's clock): op and status, the lease acted on as the
// operation answers it, the request's id and fingerprint, and actor and
// reason (reason is "" except for revoke). ExpiresAt is the lease's expiry
// after the change (for release and revoke: when it would have expired).
// ID is left zero: the database assigns it.
func NewRecorded(at time.Time, op protocol.Op, status protocol.Status, l protocol.Lease,
	requestID, fingerprint, actor, reason string) Recorded {
	return Recorded{
		Record: audit.Record{
			At: at, Op: op, Namespace: l.Key.Namespace, Key: l.Key.Name, Owner: l.Owner, Token: l.Token,
			RequestID: requestID, Actor: actor, Reason: reason, Status: status, Version: audit.RecordFormatVersion,
			ExpiresAt: l.ExpiresAt,
		},
		ParamsHash: StoredFingerprint(fingerprint),
		AcquiredAt: l.AcquiredAt,
		RenewedAt:  l.RenewedAt,
	}
}

// StoredFingerprintLen is how much of a request's fingerprint (64 hex
// digits of SHA-256) a record keeps: 128 bits tell a reused request id
// apart as surely, in half the bytes of every record and index entry.
const StoredFingerprintLen = 32

// StoredFingerprint returns the part of fingerprint a record keeps.
func StoredFingerprint(fingerprint string) string {
	return fingerprint[:min(len(fingerprint), StoredFingerprintLen)]
}

// SameFingerprint reports whether stored, a record's params_hash (whole in
// records of schema version 1, shortened since), is fingerprint's.
func SameFingerprint(stored, fingerprint string) bool {
	return len(stored) >= min(len(fingerprint), StoredFingerprintLen) && strings.HasPrefix(fingerprint, stored)
}

// Replay answers a state-changing request whose (namespace, request id) is
// already in the audit trail as rec. When rec was written by the same
// operation with the same parameters (op and fingerprint match), the result
// is the recorded outcome with Replayed set and the lease as the first
// request answered it. Records written before schema version 2 lack some
// times: acquired_at is then At for acquire and zero otherwise, renewed_at
// At for acquire and renew and zero otherwise, and expires_at zero for
// release and revoke. Otherwise the result is invalid: the request id was
// reused with other parameters.
//
// A row of an unknown format version is refused with the error of
// [CheckRecordVersion]; the caller writes nothing in either case.
func Replay(rec Recorded, op protocol.Op, fingerprint string) (protocol.Result, error) {
	if err := CheckRecordVersion(op, rec.Version); err != nil {
		return protocol.Result{}, err
	}
	if rec.Op != op || !SameFingerprint(rec.ParamsHash, fingerprint) {
		return protocol.Result{
			Status: protocol.StatusInvalid,
			Message: fmt.Sprintf("request id %q was already used in namespace %q by an earlier %s of %s with other parameters",
				rec.RequestID, rec.Namespace, rec.Op, rec.Key),
		}, nil
	}
	l := &protocol.Lease{
		Key:        protocol.Key{Namespace: rec.Namespace, Name: rec.Key},
		Owner:      rec.Owner,
		Token:      rec.Token,
		AcquiredAt: rec.AcquiredAt,
		RenewedAt:  rec.RenewedAt,
		ExpiresAt:  rec.ExpiresAt,
		Version:    protocol.LeaseFormatVersion,
	}
	if l.AcquiredAt.IsZero() && op == protocol.OpAcquire {
		l.AcquiredAt = rec.At
	}
	if l.RenewedAt.IsZero() && (op == protocol.OpAcquire || op == protocol.OpRenew) {
		l.RenewedAt = rec.At
	}
	return protocol.Result{Status: rec.Status, Lease: l, Replayed: true}, nil
}

// LeasePage turns rows fetched with LIMIT limit+1, ordered by name, into a
// list page: at most limit leases, and a NextCursor resuming after the last
// one only when a further row exists. limit must be positive. The slice is
// reused.
func LeasePage(rows []protocol.Lease, limit int) protocol.ListResult {
	res := protocol.ListResult{Status: protocol.StatusFound, Leases: rows}
	if len(rows) > limit {
		res.Leases = rows[:limit]
		res.NextCursor = protocol.EncodeListCursor(rows[limit-1].Key.Name)
	}
	if res.Leases == nil {
		res.Leases = []protocol.Lease{}
	}
	return res
}

// AuditPage is [LeasePage] for audit records fetched with LIMIT limit+1,
// ordered by id; the cursor resumes after the last record's id.
func AuditPage(rows []audit.Record, limit int) audit.Page {
	p := audit.Page{Records: rows}
	if len(rows) > limit {
		p.Records = rows[:limit]
		p.NextCursor = audit.EncodeCursor(rows[limit-1].ID)
	}
	if p.Records == nil {
		p.Records = []audit.Record{}
	}
	return p
}
