package cli

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// watch KEY goes on past a prune of the other keys' records it read over
// (audit.Page.FollowCursor), and must then still report its lease's
// expiry. It did not: the expiry check asks the trail for a change of the
// key after the last record the watch printed (expiryWatch.last), not
// after where the watch has read to, so once a prune removed records after
// that one the check failed "behind a prune" at every try, and the expire
// event never came, while the watch ran on (exit 0) as if the lease were
// still held. Before Page.FollowCursor the watch itself stopped there
// (exit 5); now it stays silent. (SQLite: a follower's reads are never
// held back, so two reads after the other key's acquire have passed it.)
func TestWatchKeyReportsExpiryAfterAPruneOfOtherKeys(t *testing.T) {
	e := sqliteEnv(t)
	const ttl = 3 * time.Second
	taken := time.Now()
	wantCode(t, runCLI(t, e, "acquire", "mine", "-n", "w", "--owner", "o", "--ttl", ttl.String()), 0)

	var reads atomic.Int64 // audit reads made by any command of this test
	testObserver = protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == protocol.OpAudit {
			reads.Add(1)
		}
	})
	t.Cleanup(func() { testObserver = nil })

	w := startWatch(e, "mine", "-n", "w", "-o", "json", "--interval", "20ms")
	if !w.waitFor(t, true, "following changes", 30*time.Second) {
		t.Fatalf("the watch did not start:\n%s", w.errs.String())
	}
	wantCode(t, runCLI(t, e, "acquire", "other", "-n", "w", "--owner", "o", "--ttl", "1h"), 0)
	// Two reads after the acquire of other: the second began after it
	// committed, so the watch has read over it.
	seen := reads.Load()
	for deadline := time.Now().Add(30 * time.Second); reads.Load() < seen+2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch made no two audit reads after the acquire of other")
		}
	}
	// Both acquires go: mine's, which the watch read (it started after it),
	// and other's, which it read over.
	wantCode(t, runCLI(t, e, "audit", "prune", "--before", time.Now().UTC().Format(time.RFC3339Nano), "--yes"), 0)
	if time.Since(taken) >= ttl {
		t.Fatalf("the setup took %v, past the lease's %v TTL: the expiry could be judged before the prune; raise the TTL", time.Since(taken), ttl)
	}
	if strings.Contains(w.out.String(), `"op":"expire"`) {
		t.Fatalf("expire event before the lease expired:\n%s", w.out.String())
	}

	got := w.waitFor(t, false, `"op":"expire"`, ttl+20*time.Second)
	out := w.stop(t)
	if !got {
		t.Fatalf("watch mine printed no expire event in the 20s after its %v lease ran out, following a prune that removed "+
			"only records it had read or read over (mine's acquire, other's acquire); it ran on as if the lease were held:\n"+
			"stdout: %s\nstderr: %s", ttl, out, w.errs.String())
	}
}
