package sqlite_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Each write commits one page of each b-tree (table or index) its
// guarantees need, and no other: every page is a frame of the log, written
// and synced with the commit (BenchmarkWALFrames counts them over many
// keys, splits included).
//
//   - leasestore_leases: the lease's row.
//   - leasestore_leases_live, leasestore_leases_owner_live: lists read
//     live leases only, through them (migration 3), so a lease taken
//     enters both and one given up leaves both; a renew changes neither.
//   - leasestore_fencing (acquire): the counter of issued tokens, bumped
//     in the transaction, so tokens never go back, even for a key whose
//     row the sweep removed.
//   - leasestore_audit and its indexes: the record, written in the
//     transaction of the change; sqlite_autoindex_leasestore_audit_1 is
//     UNIQUE (namespace, request_id), through which every write tells a
//     new request id from a used one (idempotency); leasestore_audit_key
//     serves a key's history. (No time index: reads by time and prunes
//     walk the primary key, and migration 10 dropped the one no
//     statement read.)
//   - sqlite_sequence: AUTOINCREMENT's counter of record ids, so that ids
//     never go back even after a prune removed every record.
func TestWritesCommitOnePageOfEachBTreeTheyNeed(t *testing.T) {
	t.Parallel()
	audit := []string{"leasestore_audit", "leasestore_audit_key",
		"sqlite_autoindex_leasestore_audit_1", "sqlite_sequence"}
	want := map[string][]string{
		"acquire": append([]string{"leasestore_fencing", "leasestore_leases", "leasestore_leases_live",
			"leasestore_leases_owner_live"}, audit...),
		"renew":   append([]string{"leasestore_leases"}, audit...),
		"release": append([]string{"leasestore_leases", "leasestore_leases_live", "leasestore_leases_owner_live"}, audit...),
	}
	path := migratedFile(t)
	b := open(t, path, nil)
	first, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("first"), Owner: "w", TTL: time.Hour, RequestID: "a0"})
	wantStatus(t, "acquire", first, err, protocol.StatusAcquired)
	w := pinWAL(t, path)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	w.count("acquire")
	renew, err := b.Renew(ctxT(t), protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour, RequestID: "r1"})
	wantStatus(t, "renew", renew, err, protocol.StatusRenewed)
	w.count("renew")
	rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, RequestID: "x1"})
	wantStatus(t, "release", rel, err, protocol.StatusReleased)
	w.count("release")
	trees := w.byTree()
	for _, op := range []string{"acquire", "renew", "release"} {
		got := trees[op]
		for _, name := range want[op] {
			if got[name] != 1 {
				t.Errorf("%s wrote %v pages of %s, want 1 (pages: %v)", op, got[name], name, got)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(got)) {
			if !slices.Contains(want[op], name) {
				t.Errorf("%s wrote %v pages of %s, which it does not need (pages: %v)", op, got[name], name, got)
			}
		}
	}
}
