package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// chaosEnv turns on the long fault cases (`make chaos`).
const chaosEnv = "LEASESTORE_CHAOS"

// lateExpiry is how long past its expires_at an etcd lease may stay live
// on a healthy cluster: the expiry second's rounding and the TTL's (up to
// 2s) and the leader's expiry checks (every 500ms) and their revocation.
const lateExpiry = 3 * time.Second

// linRun is a lincheck workload of several processes (each a Backend with
// a client of its own) on one store.
type linRun struct {
	endpoints []string
	prefix    string
	procs     int
	clients   int // per process
	ops       int // per process
	// attempt is each attempt's deadline (0: the workload's default): a
	// short one makes attempts meeting a fault time out and retry with
	// their request ids.
	attempt time.Duration
	// lockDelay is the workload's longest lock-delay (0: none); lose is
	// its LoseAnswers.
	lockDelay time.Duration
	lose      float64
}

// run runs the workloads until each made r.ops operations, closes the
// backends and returns the merged history.
func (r linRun) run(t *testing.T, ctx context.Context) *lincheck.History {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hist lincheck.History
	)
	for i := range r.procs {
		b, err := etcd.Open(ctx, &etcd.Config{Endpoints: r.endpoints, Prefix: r.prefix})
		if err != nil {
			t.Fatalf("open process %d: %v", i, err)
		}
		rt := protocol.New(b, nil)
		rec := lincheck.NewRecorder(fmt.Sprintf("p%d", i), nil)
		w := &lincheck.Workload{Store: rt, Recorder: rec, Clients: r.clients, Ops: r.ops, RetryFor: time.Minute,
			AttemptTimeout: r.attempt, LockDelay: r.lockDelay, LoseAnswers: r.lose}
		wg.Go(func() {
			defer rt.Close(context.Background())
			stats, err := w.Run(ctx)
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s: %v", rec.Process(), stats)
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(rec.History())
		})
	}
	wg.Wait()
	return &hist
}

// checkAudit checks the store's audit trail against h (see
// [lincheck.CheckAudit]) through a client of its own.
func (r linRun) checkAudit(t *testing.T, h *lincheck.History) {
	t.Helper()
	b, err := etcd.Open(t.Context(), &etcd.Config{Endpoints: r.endpoints, Prefix: r.prefix})
	if err != nil {
		t.Fatalf("open a client to read the audit trail: %v", err)
	}
	defer b.Close(context.Background())
	if err := lincheck.CheckAudit(t.Context(), h, b); err != nil {
		t.Fatal(err)
	}
}

// check runs the checker with late as the late-expiry allowance.
func check(t *testing.T, h *lincheck.History, late time.Duration) lincheck.Result {
	t.Helper()
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name(), Dir: os.TempDir(), LateExpiry: late, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("linearizable: %v", res)
	if res.Operations < 3000 {
		t.Fatalf("only %d operations checked, want at least 3000", res.Operations)
	}
	return res
}

// TestLincheckHealthy: 3,000 operations of 9 clients in 3 processes on
// three keys of the shared cluster, with real etcd leases (short TTLs
// expire and are taken over), are linearizable with the lease model,
// expiry allowed up to lateExpiry late and never early.
func TestLincheckHealthy(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	r := linRun{endpoints: c.Endpoints(), prefix: c.Prefix(t), procs: 3, clients: 3, ops: 1000}
	h := r.run(t, t.Context())
	check(t, h, lateExpiry)
	r.checkAudit(t, h)
}

// TestLincheckLockDelay: TestLincheckHealthy with lock-delays (one
// acquire in four asks for one, up to 2 s): kept by the cluster's etcd
// leases, a lock-delay may end late, like expiry, never early. One answer
// in twenty is lost, as a network would lose it: its operation is retried
// with its request id (a replay when it took effect) or left unknown.
func TestLincheckLockDelay(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	r := linRun{endpoints: c.Endpoints(), prefix: c.Prefix(t), procs: 3, clients: 3, ops: 1000, lockDelay: 2 * time.Second,
		lose: 0.05}
	h := r.run(t, t.Context())
	if res := check(t, h, lateExpiry); res.Unknown == 0 {
		t.Fatal("no operation of unknown outcome: the lost answers were not tested")
	}
	r.checkAudit(t, h)
}

// fault is what a fault case does to its cluster while the workload runs:
// it injects one fault and returns its name and how late, beyond
// lateExpiry, it may make a lease expire.
//
// A leader that takes over renews every etcd lease by its TTL, so leader
// changes closer together than a TTL (plus an election) would keep a lease
// alive for as long as they go on: late without bound. After a fault that
// may make a lease late, the next one waits that long, so the bound holds.
type fault func(t *testing.T, c *etcdcluster.Cluster, rng *rand.Rand) (string, time.Duration)

// leaderChangeLate is how late a leader change may make a lease: the
// election (up to about 1.5 s after the leader died, with an election
// timeout of 500 ms), then the lease's TTL (up to 2 s here) and the
// extension a new leader adds (an election timeout).
const leaderChangeLate = 4 * time.Second

// killMember SIGKILLs a random member (it may be the leader) and restarts
// it after a pause.
func killMember(t *testing.T, c *etcdcluster.Cluster, rng *rand.Rand) (string, time.Duration) {
	i := rng.IntN(len(c.Members))
	leader := c.Leader(t.Context()) == i
	c.Kill(i)
	time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
	if err := c.Restart(i); err != nil {
		t.Errorf("restart %s: %v", c.Members[i].Name, err)
	}
	if leader {
		return "member kill (leader)", leaderChangeLate
	}
	return "member kill", 0
}

// killLeader SIGKILLs the leader, mid-operation of the workload, and
// restarts it once another member leads.
func killLeader(t *testing.T, c *etcdcluster.Cluster, rng *rand.Rand) (string, time.Duration) {
	i := c.Leader(t.Context())
	if i < 0 {
		return "", 0
	}
	c.Kill(i)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.Leader(t.Context()); l >= 0 && l != i {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
	if err := c.Restart(i); err != nil {
		t.Errorf("restart %s: %v", c.Members[i].Name, err)
	}
	return "leader kill", leaderChangeLate
}

// quorumOutage is how long loseQuorum keeps two of three members down.
const quorumOutage = 3 * time.Second

// loseQuorum SIGKILLs two members, keeps them down for quorumOutage (every
// operation answers timeout or unavailable meanwhile: the workload's
// chains retry with their request ids) and restarts them.
func loseQuorum(t *testing.T, c *etcdcluster.Cluster, rng *rand.Rand) (string, time.Duration) {
	first := rng.IntN(len(c.Members))
	second := (first + 1 + rng.IntN(len(c.Members)-1)) % len(c.Members)
	c.Kill(first)
	c.Kill(second)
	time.Sleep(quorumOutage)
	for _, i := range []int{first, second} {
		if err := c.Restart(i); err != nil {
			t.Errorf("restart %s: %v", c.Members[i].Name, err)
		}
	}
	// Leases cannot expire without a leader; the new one renews them all.
	return "quorum loss", quorumOutage + leaderChangeLate
}

// runFaults runs a workload of ops operations per process (3 processes of
// 3 clients) on a cluster of its own, injecting f every pause until the
// workload ends, then checks the history, that every member is back, and
// the audit trail against the history.
func runFaults(t *testing.T, f fault, opsPerProc int, pause time.Duration) {
	ctx := t.Context()
	c, err := etcdcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	done := make(chan struct{})
	var (
		faults = map[string]int{}
		late   time.Duration
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(pause):
			}
			name, l := f(t, c, rng)
			if name != "" {
				faults[name]++
			}
			late = max(late, l)
			if err := c.WaitHealthy(ctx); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-done:
				return
			case <-time.After(l): // see fault
			}
		}
	})
	r := linRun{endpoints: c.Endpoints(), prefix: "/chaos", procs: 3, clients: 3, ops: opsPerProc, attempt: time.Second}
	h := r.run(t, ctx)
	close(done)
	wg.Wait()
	t.Logf("faults injected: %v", faults)
	if len(faults) == 0 {
		t.Fatal("no fault was injected during the run")
	}
	check(t, h, lateExpiry+late)
	// The trail after the faults: one record for each change that took
	// effect, none for a refusal, at most one for an unknown outcome.
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkAudit(t, h)
}

// TestFaultMemberKill (in make test): 3,000 operations while members are
// SIGKILLed and restarted, a fault every second or so.
func TestFaultMemberKill(t *testing.T) {
	t.Parallel()
	runFaults(t, killMember, 1000, 700*time.Millisecond)
}

// TestChaosLeaderKill (make chaos): 9,000 operations while the leader is
// SIGKILLed mid-operation again and again, and restarted once another
// member leads.
func TestChaosLeaderKill(t *testing.T) {
	if os.Getenv(chaosEnv) == "" {
		t.Skip("set " + chaosEnv + "=1 (make chaos) for the long fault cases")
	}
	runFaults(t, killLeader, 3000, 500*time.Millisecond)
}

// TestChaosQuorumLoss (make chaos): 9,000 operations while two of three
// members are down for quorumOutage at a time: operations answer timeout
// or unavailable meanwhile (retried with their request ids), never a
// wrong answer, and nothing acknowledged is lost when quorum returns.
func TestChaosQuorumLoss(t *testing.T) {
	if os.Getenv(chaosEnv) == "" {
		t.Skip("set " + chaosEnv + "=1 (make chaos) for the long fault cases")
	}
	runFaults(t, loseQuorum, 3000, 2*time.Second)
}

// TestChaosMemberKill (make chaos): TestFaultMemberKill, longer.
func TestChaosMemberKill(t *testing.T) {
	if os.Getenv(chaosEnv) == "" {
		t.Skip("set " + chaosEnv + "=1 (make chaos) for the long fault cases")
	}
	runFaults(t, killMember, 3000, 500*time.Millisecond)
}
