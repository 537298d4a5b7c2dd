package postgres_test

import (
	"fmt"
	"testing"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// batchCostMembers is how many keys one batch of BenchmarkBatchCost holds.
const batchCostMembers = 8

// BenchmarkBatchCost prices a coalesced batch's parts, on one connection:
// an op is one cycle of batchCostMembers keys, acquired in one batch
// statement (the function coalescing sends) and released in another, with
// the function as it is (full), without its subtransaction per member
// (each member's own rollback on an error, and its own audit id), and
// without the lease table's two live indexes (lists, the sweeper). Divide
// pg-cpu-us/op by 2×batchCostMembers for a member's share of the server's
// CPU; BenchmarkGuaranteeCost's raw variant prices the raw pair's acquire
// and release, which do not batch. As there, a cut removes a guarantee:
// these variants only say where the time goes.
//
//	go test -run '^$' -bench BatchCost -benchtime 1000x -count 3 ./sqlstore/postgres/
func BenchmarkBatchCost(b *testing.B) {
	for _, v := range []struct {
		name     string
		noSubtx  bool
		dropLive bool
	}{
		{name: "full"},
		{name: "without=subtransactions", noSubtx: true},
		{name: "without=live-indexes", dropLive: true},
	} {
		b.Run(v.name, func(b *testing.B) {
			env := newCycleEnv(b, v.dropLive)
			if v.noSubtx {
				if err := postgres.WithoutBatchSubtransactions(env.b); err != nil {
					b.Fatal(err)
				}
			}
			runWorkers(b, env.b.Pool(), 1, func(_, i int) error {
				ctx, cancel := benchCtx()
				defer cancel()
				keys := make([]protocol.Key, batchCostMembers)
				for j := range keys {
					keys[j] = key(fmt.Sprintf("k-%d", (i*batchCostMembers+j)%cycleKeys))
				}
				return env.b.BatchCycle(ctx, keys, "o")
			})
		})
	}
}
