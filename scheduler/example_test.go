package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// A scanner fleet of two workers shares four targets: each worker claims
// its fair share, scans its targets with their fencing tokens until it
// stops, and releases them on shutdown. (Both workers run in one process
// here, on the in-memory store; in production each is a process of its own
// on PostgreSQL or a shared SQLite file.)
func Example() {
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(context.Background())

	targets := scheduler.Static("10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24")
	scan := func(ctx context.Context, target string, token int64) {
		// Scan target until ctx ends, sending token with every write of
		// the results, so that the results' store can refuse a worker
		// that lost the target.
		<-ctx.Done()
	}
	cfg := &scheduler.Config{
		Namespace: "scans",
		TTL:       2 * time.Second,
		Logger:    slog.New(slog.DiscardHandler),
	}

	ctx, stop := context.WithCancel(context.Background())
	var workers []*scheduler.Scheduler
	done := make(chan error)
	for _, name := range []string{"scanner-a", "scanner-b"} {
		s, err := scheduler.New(store, name, targets, scan, cfg)
		if err != nil {
			panic(err)
		}
		workers = append(workers, s)
		go func() { done <- s.Run(ctx) }()
	}

	// Wait until the fleet settled: each worker sees the other and holds
	// its share.
	for settled := false; !settled; time.Sleep(20 * time.Millisecond) {
		settled = true
		for _, s := range workers {
			snap := s.Snapshot()
			settled = settled && snap.Workers == 2 && len(snap.Held()) == snap.Share
		}
	}
	for _, s := range workers {
		snap := s.Snapshot()
		fmt.Printf("%s holds %d of %d targets (fair share %d among %d workers)\n",
			snap.Worker, len(snap.Held()), snap.Targets, snap.Share, snap.Workers)
	}

	stop() // shutdown: handlers are cancelled, then every lease is released
	for range workers {
		if err := <-done; err != nil {
			panic(err)
		}
	}
	left, _ := store.List(context.Background(), protocol.ListRequest{Namespace: "scans"})
	fmt.Printf("live leases after shutdown: %d\n", len(left.Leases))
	// Output:
	// scanner-a holds 2 of 4 targets (fair share 2 among 2 workers)
	// scanner-b holds 2 of 4 targets (fair share 2 among 2 workers)
	// live leases after shutdown: 0
}
