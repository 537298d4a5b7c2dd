package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// scaleSizes are the key counts of BenchmarkScale: LEASESTORE_BENCH_SCALE
// (comma-separated) or 1,000 and 100,000.
func scaleSizes(b *testing.B) []int {
	spec := os.Getenv("LEASESTORE_BENCH_SCALE")
	if spec == "" {
		return []int{1000, 100000}
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			b.Fatalf("LEASESTORE_BENCH_SCALE=%q: want key counts of at least 100", spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// BenchmarkScale measures list (first page of live leases), list --owner,
// get and acquire in a namespace of N keys of which 99% expired and were
// set aside by the sweeper (dead), beside the same operations on N keys
// none of which expired (live). Each reports p50
// and p99 in microseconds besides ns/op. Sizes: LEASESTORE_BENCH_SCALE.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		for _, fixture := range []string{"live", "dead"} {
			dsn := pgtest.MigratedDSN(b)
			be := openBackend(b, dsn, nil)
			raw := rawPool(b, dsn)
			live := n // every key of the live fixture; every 100th of the dead one
			if fixture == "dead" {
				live = n / 100
			}
			// Live keys are spread among the dead ones: every 100th name.
			fill, cancel := context.WithTimeout(context.Background(), time.Hour)
			if _, err := raw.Exec(fill, fmt.Sprintf(`
INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, swept_token)
SELECT 'ns', 'key-' || lpad(i::text, 9, '0'), 'w' || (i / 100 %% 97), i,
       now() - interval '2 hours', now() - interval '2 hours',
       CASE WHEN i %% 100 = 0 OR NOT %[2]t THEN now() + interval '1 day' ELSE now() - interval '1 minute' END, 1,
       CASE WHEN i %% 100 = 0 OR NOT %[2]t THEN NULL ELSE i END
FROM generate_series(1, %[1]d) AS i`, n, fixture == "dead")); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.Exec(fill, "VACUUM ANALYZE leasestore_leases"); err != nil {
				b.Fatal(err)
			}
			cancel()
			mustExec(b, raw, fmt.Sprintf("SELECT setval('leasestore_fencing_seq', %d)", n))
			ops := []struct {
				name string
				run  func(i int) (protocol.Result, error)
				want protocol.Status
			}{
				{"list", func(int) (protocol.Result, error) {
					page, err := be.List(ctxT(b), protocol.ListRequest{Namespace: "ns", Limit: 100})
					if err == nil && len(page.Leases) != min(100, live) {
						err = fmt.Errorf("list: %d leases, want %d", len(page.Leases), min(100, live))
					}
					return protocol.Result{Status: protocol.StatusFound}, err
				}, protocol.StatusFound},
				{"list_owner", func(int) (protocol.Result, error) {
					page, err := be.List(ctxT(b), protocol.ListRequest{Namespace: "ns", Owner: "w1", Limit: 100})
					if err == nil && len(page.Leases) == 0 {
						err = fmt.Errorf("list by owner: no lease")
					}
					return protocol.Result{Status: protocol.StatusFound}, err
				}, protocol.StatusFound},
				{"get", func(int) (protocol.Result, error) {
					return be.Get(ctxT(b), protocol.GetRequest{Key: key(fmt.Sprintf("key-%09d", 100*(1+rand.N(n/100))))})
				}, protocol.StatusFound},
				{"acquire", func(i int) (protocol.Result, error) {
					return be.Acquire(ctxT(b), protocol.AcquireRequest{Key: key(fmt.Sprintf("new-%s-%d", fixture, i)), Owner: "w",
						TTL: time.Minute, RequestID: protocol.RandomRequestID()})
				}, protocol.StatusAcquired},
			}
			for _, op := range ops {
				b.Run(fmt.Sprintf("keys=%d/%s/%s", n, op.name, fixture), func(b *testing.B) {
					lat := make([]time.Duration, 0, b.N)
					i := 0
					for b.Loop() {
						start := time.Now()
						res, err := op.run(i)
						lat = append(lat, time.Since(start))
						i++
						if err != nil || res.Status != op.want {
							b.Fatalf("%s: %q, %v", op.name, res.Status, err)
						}
					}
					reportPercentiles(b, lat)
				})
			}
		}
	}
}

// reportPercentiles reports the p50 and p99 of lat in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
