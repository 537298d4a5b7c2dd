// Package scalebench is the body of the SQL backends' BenchmarkScale: the
// operations it times on filled stores and how it reports them. Each
// backend's benchmark fills one store of each of [Fixtures] (see its
// contract) and calls [Run] with them. It imports no database driver.
package scalebench

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

	"github.com/leasestore/leasestore/protocol"
)

// Fixtures are the two stores Run is given for each size: "live", N keys
// none of which expired; "dead", N keys of which every one but each 100th
// expired and was set aside by the sweeper. Keys are namespace "ns", name
// key-%09d for i in 1..N, owner "w" + (i/100 % 97); the fencing counter
// has issued N tokens.
var Fixtures = []string{"live", "dead"}

// Sizes returns the key counts to measure: LEASESTORE_BENCH_SCALE
// (comma-separated) or 1,000 and 100,000.
func Sizes(b *testing.B) []int {
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

// Run times list (the first page of live leases), list --owner, get (a
// random live key) and acquire (a new key) on stores of n keys, one for
// each of [Fixtures] (stores[i] filled as Fixtures[i]). Each operation is
// one sub-benchmark whose iterations run it once on every fixture, in an
// order that turns each time, so that the machine's noise falls on both
// alike; it reports each fixture's p50 and p99 in milliseconds and the
// dead fixture's over the live one's.
func Run(b *testing.B, stores []protocol.Backend, n int) {
	if len(stores) != len(Fixtures) {
		b.Fatalf("scalebench.Run: %d stores, want one for each of %v", len(stores), Fixtures)
	}
	liveKeys := func(fixture string) int { // every key of the live fixture; every 100th of the dead one
		if fixture == "dead" {
			return n / 100
		}
		return n
	}
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}
	key := func(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }
	ops := []struct {
		name string
		run  func(ctx context.Context, be protocol.Backend, fixture string, i int) error
	}{
		{"list", func(ctx context.Context, be protocol.Backend, fixture string, _ int) error {
			want := min(100, liveKeys(fixture))
			page, err := be.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 100})
			if err == nil && len(page.Leases) != want {
				err = fmt.Errorf("%d leases, want %d", len(page.Leases), want)
			}
			return err
		}},
		{"list_owner", func(ctx context.Context, be protocol.Backend, _ string, _ int) error {
			page, err := be.List(ctx, protocol.ListRequest{Namespace: "ns", Owner: "w1", Limit: 100})
			if err == nil && len(page.Leases) == 0 {
				err = fmt.Errorf("no lease")
			}
			return err
		}},
		{"get", func(ctx context.Context, be protocol.Backend, _ string, _ int) error {
			return want(be.Get(ctx, protocol.GetRequest{Key: key(fmt.Sprintf("key-%09d", 100*(1+rand.N(n/100))))}))(protocol.StatusFound)
		}},
		{"acquire", func(ctx context.Context, be protocol.Backend, fixture string, i int) error {
			return want(be.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("new-%s-%d", fixture, i)), Owner: "w",
				TTL: time.Minute, RequestID: protocol.RandomRequestID()}))(protocol.StatusAcquired)
		}},
	}
	for _, op := range ops {
		b.Run(fmt.Sprintf("keys=%d/%s", n, op.name), func(b *testing.B) {
			lat := make([][]time.Duration, len(stores))
			i := 0
			for b.Loop() {
				for j := range stores {
					f := (i + j) % len(stores)
					ctx, cancel := call()
					start := time.Now()
					err := op.run(ctx, stores[f], Fixtures[f], i)
					lat[f] = append(lat[f], time.Since(start))
					cancel()
					if err != nil {
						b.Fatalf("%s on %s: %v", op.name, Fixtures[f], err)
					}
				}
				i++
			}
			p50, p99 := map[string]float64{}, map[string]float64{}
			for f, l := range lat {
				slices.Sort(l)
				at := func(q float64) float64 { return float64(l[int(q*float64(len(l)-1))]) / float64(time.Millisecond) }
				p50[Fixtures[f]], p99[Fixtures[f]] = at(0.50), at(0.99)
				b.ReportMetric(p50[Fixtures[f]], Fixtures[f]+"-p50-ms")
				b.ReportMetric(p99[Fixtures[f]], Fixtures[f]+"-p99-ms")
			}
			b.ReportMetric(p50["dead"]/p50["live"], "dead/live-p50")
			b.ReportMetric(p99["dead"]/p99["live"], "dead/live-p99")
		})
	}
}

// want returns a check that res has status s.
func want(res protocol.Result, err error) func(protocol.Status) error {
	return func(s protocol.Status) error {
		if err == nil && res.Status != s {
			err = fmt.Errorf("status %q (%s), want %q", res.Status, res.Message, s)
		}
		return err
	}
}
