package lincheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Workload defaults.
const (
	DefaultClients        = 3
	DefaultAttemptTimeout = 10 * time.Second
	DefaultRetryFor       = 30 * time.Second
	DefaultRetryDelay     = 20 * time.Millisecond
	DefaultLongTTL        = 10 * time.Minute
	DefaultShortTTL       = 100 * time.Millisecond
)

// Workload drives a [protocol.Store] with random operations from concurrent
// clients and records each in a [Recorder]. Each client is one goroutine
// doing one logical operation at a time on one of Keys: acquire, renew and
// release of the leases it holds, get, revoke (of whatever lease is live, or
// of a token it saw), and probes with tokens or owners that are not its own
// (stale, future, someone else's), so that every status of the vocabulary
// comes up. Now and then a client stops renewing a lease it holds and
// comes back to it later, as a paused worker would. About a third of the
// acquires and renews use a short TTL, so that leases expire during the run
// and are taken over. Now and then a client lets a lease lapse: it takes a
// key of its own (lapse-OWNER) with a short TTL, comes back after the lease
// ran out to renew or release it (which must answer expired), and takes
// the key again, inside its lock-delay if it has one (conflict) and after
// it (acquired, with a greater token); on the shared keys a lapsed lease
// is nearly always taken over first, so the holder hears stale_token and
// the expired path went untested. When an attempt answers timeout or
// unavailable the client retries with the same request id (for at most
// RetryFor); the chain is one operation whose outcome is its last answer.
// LoseAnswers makes such chains (and replays) happen without a fault in the
// store.
//
// Set the fields before [Workload.Run]; zero values mean the defaults.
type Workload struct {
	// Store is the store under test. Required; Run does not close it.
	Store protocol.Store
	// Recorder records the operations. Required. Its process name prefixes
	// the clients' owner names and request ids.
	Recorder *Recorder
	// Namespace of the keys. Default: "lincheck".
	Namespace string
	// Keys the clients share. Default: k0, k1, k2.
	Keys []string
	// Clients is the number of concurrent clients. Default: [DefaultClients].
	Clients int
	// Ops stops the run after this many logical operations (all clients
	// together). Default: no limit (stop with ctx or Duration).
	Ops int
	// Duration stops the run after this long. Default: no limit.
	Duration time.Duration
	// Seed seeds the clients' choices. Default: random.
	Seed uint64
	// AttemptTimeout is each attempt's deadline. Default: [DefaultAttemptTimeout].
	AttemptTimeout time.Duration
	// RetryFor bounds how long a chain retries after timeout or
	// unavailable; then it ends with that unknown outcome.
	// Default: [DefaultRetryFor].
	RetryFor time.Duration
	// RetryDelay is the pause before a retry (jittered up to twice as
	// long). Default: [DefaultRetryDelay].
	RetryDelay time.Duration
	// LongTTL is the TTL of most leases; it should outlast the run.
	// Default: [DefaultLongTTL].
	LongTTL time.Duration
	// ShortTTL is the longest of the short TTLs (drawn from ShortTTL/8 up,
	// in whole milliseconds). Default: [DefaultShortTTL].
	ShortTTL time.Duration
	// LockDelay, when positive, is the longest lock-delay that one acquire
	// in four asks for (drawn from LockDelay/8 up, in whole milliseconds);
	// one renew in five then asks for no TTL (keep the lease's). Default:
	// 0, no lock-delays, every renew with a TTL.
	LockDelay time.Duration
	// Think is a pause between a client's operations, to bound the size
	// of a long run's history. Default: none.
	Think time.Duration
	// LoseAnswers is the probability (0 to 1) that the workload throws an
	// attempt's answer away, as a network that lost the response would,
	// and takes it for unavailable: the operation may well have taken
	// effect. Three chains in four then retry (and should meet a replay);
	// the fourth gives up at once and ends with an unknown outcome.
	// Default: 0.
	LoseAnswers float64
}

// Stats counts a run's operations.
type Stats struct {
	Ops      int            // logical operations
	Unknown  int            // of which ended with an unknown outcome
	Retried  int            // of which needed more than one attempt
	Replayed int            // of which ended with a replayed result
	Outcomes map[string]int // "op status" -> count, e.g. "acquire conflict"
}

// String lists the counts, outcomes sorted.
func (s Stats) String() string {
	var outs []string
	for k, n := range s.Outcomes {
		outs = append(outs, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), n))
	}
	sort.Strings(outs)
	return fmt.Sprintf("%d ops, %d unknown, %d retried, %d replayed; %s",
		s.Ops, s.Unknown, s.Retried, s.Replayed, strings.Join(outs, " "))
}

// Run runs the workload until ctx is done, Duration passed or Ops were
// started, whichever comes first; a chain in flight then finishes (its
// attempts do not use ctx). It returns the counts and the recorder's write
// error, if any.
func (w *Workload) Run(ctx context.Context) (Stats, error) {
	if w.Store == nil || w.Recorder == nil {
		return Stats{}, errors.New("lincheck: workload: Store and Recorder are required")
	}
	cfg := w.withDefaults()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	var (
		started atomic.Int64
		mu      sync.Mutex
		stats   = Stats{Outcomes: map[string]int{}}
		wg      sync.WaitGroup
	)
	for i := range cfg.Clients {
		c := &client{
			w:      &cfg,
			id:     i,
			owner:  fmt.Sprintf("%s/c%d", cfg.Recorder.Process(), i),
			rng:    rand.New(rand.NewPCG(seed, uint64(i))),
			held:   map[string]int64{},
			paused: map[string]int64{},
			seen:   map[string]Lease{},
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				if cfg.Ops > 0 && started.Add(1) > int64(cfg.Ops) {
					return
				}
				if cfg.Think > 0 {
					time.Sleep(cfg.Think)
				}
				op := c.next()
				mu.Lock()
				stats.Ops++
				stats.Outcomes[string(op.Op)+" "+string(statusOf(op.Outcome))]++
				if op.Unknown() {
					stats.Unknown++
				}
				if op.Outcome.Attempts > 1 {
					stats.Retried++
				}
				if op.Outcome.Replayed {
					stats.Replayed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return stats, cfg.Recorder.Err()
}

func statusOf(o *Outcome) protocol.Status {
	if o == nil {
		return "none"
	}
	return o.Status
}

func (w *Workload) withDefaults() Workload {
	c := *w
	if c.Namespace == "" {
		c.Namespace = "lincheck"
	}
	if len(c.Keys) == 0 {
		c.Keys = []string{"k0", "k1", "k2"}
	}
	if c.Clients <= 0 {
		c.Clients = DefaultClients
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.RetryFor <= 0 {
		c.RetryFor = DefaultRetryFor
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.LongTTL <= 0 {
		c.LongTTL = DefaultLongTTL
	}
	if c.ShortTTL <= 0 {
		c.ShortTTL = DefaultShortTTL
	}
	return c
}

// client is one of a workload's clients. Only its goroutine uses it.
type client struct {
	w      *Workload
	id     int
	owner  string
	rng    *rand.Rand
	n      int
	held   map[string]int64 // key -> token of a lease this client acquired and has not given up
	paused map[string]int64 // key -> token of a lease this client stopped renewing
	seen   map[string]Lease // key -> the last lease a result showed
	lapse  *lapse           // the lapse under way, nil when none
}

// lapse is a client's lapse of a lease on its own key (see [Workload]).
type lapse struct {
	step    int
	token   int64
	expires time.Time     // the lease's expires_at, as the store answered
	delay   time.Duration // its lock-delay
}

// lapsePercent is how often (in percent of its operations) a client not in
// a lapse starts one.
const lapsePercent = 3

// next chooses, runs and records one logical operation, and learns from it.
func (c *client) next() Operation {
	if c.lapse != nil || c.rng.IntN(100) < lapsePercent {
		return c.lapseStep()
	}
	key := c.w.Keys[c.rng.IntN(len(c.w.Keys))]
	if len(c.held) > 0 && c.rng.IntN(100) < 60 {
		// Mostly act on a lease held: renew or release it.
		held := make([]string, 0, len(c.held))
		for k := range c.held {
			held = append(held, k)
		}
		sort.Strings(held)
		key = held[c.rng.IntN(len(held))]
	}
	req := Request{Namespace: c.w.Namespace, Key: key}
	tok, holds := c.held[key]
	if holds && c.rng.IntN(100) < 4 {
		// The client pauses, as a worker stuck in a long GC would: it stops
		// renewing and comes back later with the old token (a probe).
		delete(c.held, key)
		c.paused[key] = tok
		holds = false
	}
	seen, hasSeen := c.seen[key]
	// Weights in percent: acquire, renew, release, get, revoke; the rest
	// are probes.
	weights := [5]int{40, 0, 0, 20, 10}
	if holds {
		weights = [5]int{10, 35, 30, 10, 5}
	}
	choice, p := 0, c.rng.IntN(100)
	for ; choice < len(weights) && p >= weights[choice]; choice++ {
		p -= weights[choice]
	}
	switch choice {
	case 0:
		req.Op, req.Owner, req.TTL = protocol.OpAcquire, c.owner, c.ttl()
		if c.w.LockDelay > 0 && c.rng.IntN(4) == 0 {
			req.LockDelay = c.lockDelay()
		}
	case 1:
		req.Op, req.Owner, req.Token, req.TTL = protocol.OpRenew, c.owner, tok, c.ttl()
		if c.w.LockDelay > 0 && c.rng.IntN(5) == 0 {
			req.TTL = 0
		}
	case 2:
		req.Op, req.Owner, req.Token = protocol.OpRelease, c.owner, tok
	case 3:
		req.Op = protocol.OpGet
	case 4:
		req.Op, req.Owner = protocol.OpRevoke, c.owner
		if hasSeen && c.rng.IntN(2) == 0 {
			req.Token = seen.Token + int64(c.rng.IntN(3)) - 1 // that lease, an older or a newer one
		}
	default:
		// A probe: renew or release with a lease that is not (or no longer)
		// this client's, or with a token never issued.
		req.Op = protocol.OpRenew
		if c.rng.IntN(2) == 0 {
			req.Op = protocol.OpRelease
		}
		req.Owner, req.Token = c.owner, int64(1+c.rng.IntN(3))
		if old, ok := c.paused[key]; ok && c.rng.IntN(2) == 0 {
			// Back from the pause: expired, or fenced off by a newer lease.
			req.Token = old
			delete(c.paused, key)
		} else if hasSeen {
			switch c.rng.IntN(4) {
			case 0: // the lease seen, as its owner would: may well succeed
				req.Owner, req.Token = seen.Owner, seen.Token
			case 1: // that token, another owner
				req.Token = seen.Token
			case 2: // an older token
				req.Token = max(1, seen.Token-1)
			default: // a token not issued yet
				req.Token = seen.Token + 1000
			}
		}
		if req.Op == protocol.OpRenew {
			req.TTL = c.ttl()
		}
	}
	if req.Op == protocol.OpRevoke && req.Token < 0 {
		req.Token = 0
	}
	out := c.do(req)
	c.learn(req, out)
	return Operation{Request: req, Outcome: &out}
}

// do gives req the client's next request id, runs and records it.
func (c *client) do(req Request) Outcome {
	c.n++
	req.RequestID = fmt.Sprintf("%s-%d", c.owner, c.n)
	pending := c.w.Recorder.Begin(c.id, req)
	out := c.run(req)
	pending.End(out)
	return out
}

// lapseStep runs the next operation of the client's lapse, starting one
// when none is under way: 0 acquire with a short TTL; 1 after the lease
// ran out, renew or release it; 2 (with a lock-delay) acquire inside the
// delay; 3 acquire after it; 4 release. An acquire that did not answer
// acquired ends the lapse.
func (c *client) lapseStep() Operation {
	if c.lapse == nil {
		c.lapse = &lapse{}
	}
	lp := c.lapse
	req := Request{Op: protocol.OpAcquire, Namespace: c.w.Namespace, Key: "lapse-" + c.owner, Owner: c.owner}
	lapsed := lp.expires.Add(2 * ClockSlack)
	switch lp.step {
	case 0:
		req.TTL = c.shortTTL()
		if c.w.LockDelay > 0 && c.rng.IntN(2) == 0 {
			req.LockDelay = c.lockDelay()
		}
	case 1:
		time.Sleep(time.Until(lapsed))
		req.Op, req.Token, req.TTL = protocol.OpRenew, lp.token, c.shortTTL()
		if c.rng.IntN(2) == 0 {
			req.Op, req.TTL = protocol.OpRelease, 0
		}
	case 2:
		req.TTL = c.shortTTL()
	case 3:
		time.Sleep(time.Until(lapsed.Add(lp.delay)))
		req.TTL = c.shortTTL()
	case 4:
		req.Op, req.Token = protocol.OpRelease, lp.token
	}
	out := c.do(req)
	switch {
	case lp.step == 4:
		c.lapse = nil
	case req.Op != protocol.OpAcquire:
		lp.step = 3
		if lp.delay > 0 {
			lp.step = 2
		}
	case lp.step == 2:
		lp.step = 3
	case out.Status != protocol.StatusAcquired || out.Lease == nil:
		c.lapse = nil
	default:
		lp.token, lp.expires, lp.delay = out.Lease.Token, time.Unix(0, out.Lease.ExpiresAt), req.LockDelay
		lp.step++
	}
	return Operation{Request: req, Outcome: &out}
}

// ttl draws a TTL: a long one, or a short one.
func (c *client) ttl() time.Duration {
	if c.rng.IntN(3) > 0 {
		return c.w.LongTTL
	}
	return c.shortTTL()
}

// shortTTL draws a short TTL, in whole milliseconds.
func (c *client) shortTTL() time.Duration {
	hi := max(int64(c.w.ShortTTL/time.Millisecond), 1)
	lo := max(hi/8, 1)
	return time.Duration(lo+c.rng.Int64N(hi-lo+1)) * time.Millisecond
}

// lockDelay draws a lock-delay, in whole milliseconds.
func (c *client) lockDelay() time.Duration {
	hi := max(int64(c.w.LockDelay/time.Millisecond), 1)
	return time.Duration(max(hi/8, 1)+c.rng.Int64N(hi-max(hi/8, 1)+1)) * time.Millisecond
}

// run runs req's retry chain and returns its outcome.
func (c *client) run(req Request) Outcome {
	k := protocol.Key{Namespace: req.Namespace, Name: req.Key}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), c.w.AttemptTimeout)
		var res protocol.Result
		var err error
		switch req.Op {
		case protocol.OpAcquire:
			res, err = c.w.Store.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: req.Owner, TTL: req.TTL, RequestID: req.RequestID, LockDelay: req.LockDelay})
		case protocol.OpRenew:
			res, err = c.w.Store.Renew(ctx, protocol.RenewRequest{Key: k, Owner: req.Owner, Token: req.Token, TTL: req.TTL, RequestID: req.RequestID})
		case protocol.OpRelease:
			res, err = c.w.Store.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: req.Owner, Token: req.Token, RequestID: req.RequestID})
		case protocol.OpRevoke:
			res, err = c.w.Store.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: req.Owner, Reason: "lincheck", Token: req.Token, RequestID: req.RequestID})
		case protocol.OpGet:
			res, err = c.w.Store.Get(ctx, protocol.GetRequest{Key: k, RequestID: req.RequestID})
		}
		cancel()
		status := res.Status
		if status == "" {
			status = protocol.StatusOf(err)
		}
		out := Outcome{Status: status, Replayed: res.Replayed, Attempts: attempt, Lease: LeaseOf(res.Lease)}
		if c.w.LoseAnswers > 0 && c.rng.Float64() < c.w.LoseAnswers {
			out = Outcome{Status: protocol.StatusUnavailable, Attempts: attempt}
			if c.rng.IntN(4) == 0 {
				return out
			}
		}
		retry := out.Status == protocol.StatusTimeout || out.Status == protocol.StatusUnavailable
		if !retry || time.Since(start) >= c.w.RetryFor {
			return out
		}
		d := c.w.RetryDelay
		time.Sleep(d + time.Duration(c.rng.Int64N(int64(d)+1)))
	}
}

// learn updates what the client believes it holds and has seen.
func (c *client) learn(req Request, out Outcome) {
	if out.Lease != nil && out.Status != protocol.StatusReleased && out.Status != protocol.StatusRevoked {
		c.seen[req.Key] = *out.Lease
	}
	switch {
	case req.Op == protocol.OpAcquire && out.Status == protocol.StatusAcquired:
		c.held[req.Key] = out.Lease.Token
	case req.Op == protocol.OpRenew && out.Status == protocol.StatusRenewed:
	case req.Op == protocol.OpRenew || req.Op == protocol.OpRelease:
		// Released, refused or unknown: if it was this client's lease, it
		// is no longer one it can count on.
		if req.Owner == c.owner && c.held[req.Key] == req.Token {
			delete(c.held, req.Key)
		}
	}
}
