// Package sqlstore holds what leasestore's SQL dialects share beyond the
// neutral bookkeeping of [backendkit]: the names of the database objects,
// format-version checks for rows read back, replays that refuse records of
// an unknown version, and which schema versions a release can serve.
//
// SQL text is not shared: every statement of a dialect lives in that
// dialect's package (sqlstore/postgres, sqlstore/sqlite). This package must
// not import any database driver; it depends only on protocol, audit and
// backendkit.
// Everything in it is a pure function or a constant, safe for concurrent use.
package sqlstore

import (
	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
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
	return backendkit.NewError(op, protocol.StatusUnavailable, nil,
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
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"%s has no leasestore schema: run `leasectl migrate up` (or call migrations.Up) first", where)
	case found < want:
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"%s has leasestore schema version %d, this release needs %d: run `leasectl migrate up` (or call migrations.Up)",
			where, found, want)
	default:
		return backendkit.NewError("", protocol.StatusUnavailable, nil,
			"%s has leasestore schema version %d, newer than the %d this release knows, and releases older than "+
				"its own cannot serve it: upgrade leasestore",
			where, found, want)
	}
}

// Replay is [backendkit.Replay] for a record read from [AuditTable]: a
// record of an unknown format version is refused with the error of
// [CheckRecordVersion] first.
func Replay(rec backendkit.Recorded, op protocol.Op, fingerprint string) (protocol.Result, error) {
	if err := CheckRecordVersion(op, rec.Version); err != nil {
		return protocol.Result{}, err
	}
	return backendkit.Replay(rec, op, fingerprint), nil
}

// ReplayAcquire is [backendkit.ReplayAcquire] for a record read from
// [AuditTable], refusing a record of an unknown format version first as
// [Replay] does.
func ReplayAcquire(rec backendkit.Recorded, req protocol.AcquireRequest) (protocol.Result, error) {
	if err := CheckRecordVersion(protocol.OpAcquire, rec.Version); err != nil {
		return protocol.Result{}, err
	}
	return backendkit.ReplayAcquire(rec, req), nil
}
