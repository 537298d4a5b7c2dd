package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// BenchmarkPruneBesideLiveLeases prunes a trail of 200,000 records of
// ended leases up to the store's time, with 0 or 50,000 live leases whose
// acquire records lie before the cut-off, at the front of the trail, and
// stay (a retry of the acquire replays from them). Each op is one whole
// prune on a fresh file, filled with raw rows (the triggers allow
// INSERT); removed-ns/op is its time per record removed.
//
//	go test -run '^$' -bench PruneBesideLiveLeases -benchtime 1x -count 3 ./sqlstore/sqlite/
func BenchmarkPruneBesideLiveLeases(b *testing.B) {
	const removed = 200_000
	for _, kept := range []int{0, 50_000} {
		b.Run(fmt.Sprintf("removed=%d/kept=%d", removed, kept), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				path := migratedFile(b)
				now := time.Now().UTC()
				fillPruneBench(b, path, now, kept, removed)
				be, err := sqlite.Open(context.Background(), path, nil)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				b.StartTimer()
				res, err := be.PruneAudit(ctx, audit.PruneRequest{Before: now, RequestID: protocol.NewRequestID(), Actor: "bench"})
				b.StopTimer()
				cancel()
				if err != nil || res.Removed != removed {
					b.Fatalf("prune: removed %d, %v; want %d", res.Removed, err, removed)
				}
				_ = be.Close(context.Background())
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/removed, "removed-ns/op")
		})
	}
}

// fillPruneBench writes, at path, kept live leases (an hour left) with
// their acquire records (ids 1..kept), then removed release records of
// other keys, all an hour before now.
func fillPruneBench(b *testing.B, path string, now time.Time, kept, removed int) {
	b.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	at, exp := now.Add(-time.Hour).UnixMicro(), now.Add(time.Hour).UnixMicro()
	for _, q := range []string{
		`WITH RECURSIVE s(value) AS (SELECT 1 WHERE ?3 > 0 UNION ALL SELECT value + 1 FROM s WHERE value < ?3)
		 INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		 SELECT 'bench', 'live' || value, 'w', value, ?1, ?1, ?2, 1 FROM s`,
		`WITH RECURSIVE s(value) AS (SELECT 1 WHERE ?3 > 0 UNION ALL SELECT value + 1 FROM s WHERE value < ?3)
		 INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, status, version, params_hash, expires_at)
		 SELECT value, ?1, 'acquire', 'bench', 'live' || value, 'w', value, 'a' || value, 'w', 'acquired', 1, '', ?2
		 FROM s`,
		`WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < ?4)
		 INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, status, version, params_hash)
		 SELECT ?3 + value, ?1, 'release', 'bench', 'gone' || value, 'w', ?3 + value, 'r' || value, 'w', 'released', 1, ''
		 FROM s`,
		`UPDATE leasestore_fencing SET last_token = ?3 + ?4`,
	} {
		if _, err := db.Exec(q, at, exp, kept, removed); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
}
