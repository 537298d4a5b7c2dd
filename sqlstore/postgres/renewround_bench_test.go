package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// BenchmarkRenewRound measures what a scheduler's renewal round costs: one
// op renews 60 leases, a few at a time as the scheduler does (one renew
// each), with coalescing on and, as the baseline in the same run, off.
//
//	go test -run '^$' -bench RenewRound -benchtime 50x ./sqlstore/postgres/
func BenchmarkRenewRound(b *testing.B) {
	dsn := pgtest.MigratedDSN(b)
	for _, coalescing := range []bool{false, true} {
		for _, conc := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("coalescing=%v/concurrency=%d", coalescing, conc), func(b *testing.B) {
				be, err := postgres.Open(context.Background(), dsn, &postgres.Config{NoCoalescing: !coalescing})
				if err != nil {
					b.Fatal(err)
				}
				rt := protocol.New(be, nil)
				defer rt.Close(context.Background())
				ctx := context.Background()
				ns := fmt.Sprintf("round-%v-%d-%d", coalescing, conc, b.N) // the benchmark runs once per b.N
				keys, tokens := make([]protocol.Key, 60), make([]int64, 60)
				for i := range keys {
					keys[i] = protocol.Key{Namespace: ns, Name: fmt.Sprint(i)}
					res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: keys[i], Owner: "w", TTL: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					tokens[i] = res.Lease.Token
				}
				b.ResetTimer()
				for range b.N {
					sem := make(chan struct{}, conc)
					var wg sync.WaitGroup
					for i := range keys {
						sem <- struct{}{}
						wg.Go(func() {
							defer func() { <-sem }()
							if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: keys[i], Owner: "w", Token: tokens[i], TTL: time.Hour}); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
				}
			})
		}
	}
}
