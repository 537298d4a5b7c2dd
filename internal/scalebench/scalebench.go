// Package scalebench is the body of the SQL backends' BenchmarkScale: the
// operations it times on a filled store and how it reports them. Each
// backend's benchmark fills its own store (see [Fill]'s contract) and calls
// [Run]. It imports no database driver.
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
// random live key) and acquire (a new key) on be, filled as fixture with n
// keys, each as a sub-benchmark reporting p50 and p99 in milliseconds.
func Run(b *testing.B, be protocol.Backend, n int, fixture string) {
	live := n // every key of the live fixture; every 100th of the dead one
	if fixture == "dead" {
		live = n / 100
	}
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}
	key := func(name string) protocol.Key { return protocol.Key{Namespace: "ns", Name: name} }
	ops := []struct {
		name string
		run  func(ctx context.Context, i int) error
	}{
		{"list", func(ctx context.Context, _ int) error {
			page, err := be.List(ctx, protocol.ListRequest{Namespace: "ns", Limit: 100})
			if err == nil && len(page.Leases) != min(100, live) {
				err = fmt.Errorf("%d leases, want %d", len(page.Leases), min(100, live))
			}
			return err
		}},
		{"list_owner", func(ctx context.Context, _ int) error {
			page, err := be.List(ctx, protocol.ListRequest{Namespace: "ns", Owner: "w1", Limit: 100})
			if err == nil && len(page.Leases) == 0 {
				err = fmt.Errorf("no lease")
			}
			return err
		}},
		{"get", func(ctx context.Context, _ int) error {
			return want(be.Get(ctx, protocol.GetRequest{Key: key(fmt.Sprintf("key-%09d", 100*(1+rand.N(n/100))))}))(protocol.StatusFound)
		}},
		{"acquire", func(ctx context.Context, i int) error {
			return want(be.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprintf("new-%s-%d", fixture, i)), Owner: "w",
				TTL: time.Minute, RequestID: protocol.RandomRequestID()}))(protocol.StatusAcquired)
		}},
	}
	for _, op := range ops {
		b.Run(fmt.Sprintf("keys=%d/%s/%s", n, op.name, fixture), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				ctx, cancel := call()
				start := time.Now()
				err := op.run(ctx, i)
				lat = append(lat, time.Since(start))
				cancel()
				i++
				if err != nil {
					b.Fatalf("%s: %v", op.name, err)
				}
			}
			slices.Sort(lat)
			at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
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
