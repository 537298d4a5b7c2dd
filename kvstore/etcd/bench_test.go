package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// benchKeys is how many keys the callers pick from at random.
const benchKeys = 1024

// cycle is one acquire and, when it took the key, its release; it reports
// whether the key was taken.
type cycle func(ctx context.Context, worker int, key string) (bool, error)

// runCycles runs b.N cycles spread over callers goroutines, on random keys,
// and reports the share of cycles that met a held key.
func runCycles(b *testing.B, callers int, f cycle) {
	b.Helper()
	var (
		next, conflicts atomic.Int64
		wg              sync.WaitGroup
		failed          atomic.Value
	)
	ctx := context.Background()
	b.ResetTimer()
	for w := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for next.Add(1) <= int64(b.N) {
				took, err := f(ctx, w, fmt.Sprintf("k%d", rng.IntN(benchKeys)))
				if err != nil {
					failed.Store(err)
					return
				}
				if !took {
					conflicts.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
}

// BenchmarkAcquireRelease measures an acquire and a release of a random
// key (of 1,024) on the 3-member loopback cluster, at 1, 8 and 32
// concurrent callers, three ways in the same run:
//
//   - backend: this backend through a protocol.Runtime (one Txn each for
//     acquire and release, with the audit and idempotency record);
//   - raw: the same work in the fewest transactions a client can send: a
//     put-if-absent attached to an etcd lease plus an audit put, then a
//     delete plus an audit put (one lease granted for the whole run);
//   - mutex: etcd's lock recipe, concurrency.NewMutex with TryLock and
//     Unlock, each caller with a session (an etcd lease kept alive) of its
//     own.
//
// One op is one cycle (acquire, then release when it took the key).
func BenchmarkAcquireRelease(b *testing.B) {
	c := etcdcluster.Shared(b)
	for _, callers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("backend/callers=%d", callers), func(b *testing.B) {
			prefix := c.Prefix(b)
			be, err := etcd.Open(context.Background(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			rt := protocol.New(be, nil)
			defer rt.Close(context.Background())
			runCycles(b, callers, func(ctx context.Context, w int, k string) (bool, error) {
				res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bench", Name: k},
					Owner: fmt.Sprint("w", w), TTL: time.Minute})
				if errors.Is(err, protocol.ErrConflict) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				_, err = rt.Release(ctx, protocol.ReleaseRequest{Key: res.Lease.Key, Owner: res.Lease.Owner, Token: res.Lease.Token})
				return true, err
			})
		})
		b.Run(fmt.Sprintf("raw/callers=%d", callers), func(b *testing.B) {
			runRaw(b, c, callers, 2, func(verb, k, owner string) string { return verb + " " + k + " " + owner })
		})
		b.Run(fmt.Sprintf("mutex/callers=%d", callers), func(b *testing.B) {
			prefix := c.Prefix(b)
			cli, err := c.Client()
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			sessions := make([]*concurrency.Session, callers)
			for i := range sessions {
				if sessions[i], err = concurrency.NewSession(cli, concurrency.WithTTL(60)); err != nil {
					b.Fatal(err)
				}
				defer sessions[i].Close()
			}
			runCycles(b, callers, func(ctx context.Context, w int, k string) (bool, error) {
				m := concurrency.NewMutex(sessions[w], prefix+"m/"+k)
				if err := m.TryLock(ctx); errors.Is(err, concurrency.ErrLocked) {
					return false, nil
				} else if err != nil {
					return false, err
				}
				return true, m.Unlock(ctx)
			})
		})
	}
}

// BenchmarkRawEntries measures what the number of keys a transaction
// writes costs on the same cluster: the raw loop of BenchmarkAcquireRelease
// with an audit value of this backend's size (330 bytes), writing 2 keys
// an acquire (the raw loop's) or 4 (this backend's: owner, renewal,
// liveness, audit) and deleting them again. docs/benchmarks.md cites it.
func BenchmarkRawEntries(b *testing.B) {
	c := etcdcluster.Shared(b)
	audit := strings.Repeat("x", 330)
	for _, callers := range []int{1, 8, 32} {
		for _, n := range []int{2, 4} {
			b.Run(fmt.Sprintf("keys=%d/callers=%d", n, callers), func(b *testing.B) {
				runRaw(b, c, callers, n, func(string, string, string) string { return audit })
			})
		}
	}
}

// runRaw runs the raw loop on c under a prefix of its own, with one etcd
// lease granted for the run: an acquire is a put-if-absent of the key
// attached to the lease, an audit put and keys-2 more puts of a renewal
// record's size; its release deletes them again in one transaction with
// an audit put. audit gives the audit value of an acquire or release
// (verb) of key k by owner.
func runRaw(b *testing.B, c *etcdcluster.Cluster, callers, keys int, audit func(verb, k, owner string) string) {
	b.Helper()
	const renewal = `{"v":1,"renewed_at":1764000000000000,"expires_at":1764000060000000,"ttl":60000000000}`
	prefix := c.Prefix(b)
	cli, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	lease, err := cli.Grant(context.Background(), 600)
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	runCycles(b, callers, func(ctx context.Context, w int, k string) (bool, error) {
		key := prefix + "k/" + k
		owner := fmt.Sprint("w", w)
		puts := []clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(lease.ID)),
			clientv3.OpPut(fmt.Sprintf("%sa/%d", prefix, seq.Add(1)), audit("acquire", k, owner))}
		for i := 2; i < keys; i++ {
			puts = append(puts, clientv3.OpPut(fmt.Sprint(key, "/", i), renewal))
		}
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(puts...).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		dels := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpPut(fmt.Sprintf("%sa/%d", prefix, seq.Add(1)), audit("release", k, owner))}
		for i := 2; i < keys; i++ {
			dels = append(dels, clientv3.OpDelete(fmt.Sprint(key, "/", i)))
		}
		_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Header.Revision)).Then(dels...).Commit()
		return true, err
	})
}
