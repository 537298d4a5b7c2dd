package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/protocol"
)

// fencedResource stands for what the workers write to (an object store, a
// table, a device). It remembers the highest fencing token it has seen per
// key and refuses writes carrying an older one: that is what makes a lease
// safe when its holder pauses past the TTL. Safe for concurrent use.
type fencedResource struct {
	mu      sync.Mutex
	highest map[string]int64
}

// write accepts a write to key under token, or refuses it when a newer
// token was seen.
func (r *fencedResource) write(key string, token int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.highest[key]; token < h {
		return fmt.Errorf("resource: %s refuses token %d: it has seen token %d", key, token, h)
	}
	r.highest[key] = token
	return nil
}

// statusCounter counts outcomes per operation, as a protocol.Observer.
type statusCounter struct {
	mu     sync.Mutex
	counts map[string]int64 // "op:status"
}

func (c *statusCounter) ObserveOperation(_ context.Context, ev protocol.OperationEvent) {
	if ev.Status == "" {
		return // health and close
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[string(ev.Op)+":"+string(ev.Status)]++
}

func (c *statusCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// demoJSON is the output of demo.
type demoJSON struct {
	Status    string           `json:"status"`
	Backend   string           `json:"backend"`
	Store     string           `json:"store"`
	Namespace string           `json:"namespace"`
	Story     []string         `json:"story"`
	Outcomes  map[string]int64 `json:"outcomes"` // "op:status" -> count, background renewals included
	Writes    map[string]int64 `json:"writes"`   // accepted and fenced writes to the resource
	Records   []recordJSON     `json:"records"`
}

// demo is one run of the demo.
type demo struct {
	a        *app
	rt       *protocol.Runtime
	ns       string
	ttl      time.Duration
	resource *fencedResource
	counter  *statusCounter

	mu       sync.Mutex
	story    []string
	accepted int64
	fenced   int64
}

// say tells one line of the story: printed at once in table mode, kept for
// the JSON object otherwise.
func (d *demo) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.a.output != "json" {
		d.a.printText(line + "\n")
	} else if line != "" {
		d.story = append(d.story, line)
	}
}

func (d *demo) key(name string) protocol.Key { return protocol.Key{Namespace: d.ns, Name: name} }

// write has worker write to the resource under token and tells the outcome.
func (d *demo) write(worker, shard string, token int64) bool {
	err := d.resource.write(shard, token)
	d.mu.Lock()
	if err == nil {
		d.accepted++
	} else {
		d.fenced++
	}
	d.mu.Unlock()
	if err != nil {
		d.say("   %s writes to %s with token %d: REFUSED, fenced off (%v)", worker, shard, token, err)
		return false
	}
	d.say("   %s writes to %s with token %d: accepted", worker, shard, token)
	return true
}

// holder is a worker holding a shard through protocol.Hold.
type holder struct {
	worker string
	shard  string
	held   *protocol.Held
	stop   context.CancelFunc // stops renewing without releasing: the worker "freezes"
}

func (a *app) demoCommand() *cobra.Command {
	var (
		ttl  time.Duration
		keep bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch workers compete for leases and fencing refuse a stale writer",
		Long: `Run leasestore's main job in a few seconds: four workers race for three
shards, renew their leases in the background and write to a fenced resource
with their tokens. One worker freezes past its TTL; another worker takes its
shard with a greater token, and when the frozen one comes back the resource
refuses its stale token and renew and release answer stale_token. Another
frozen worker finds its lease expired; an operator revokes a third lease and
its holder is told. The demo ends with a summary and the audit trail.

By default it runs on a fresh temporary SQLite file, deleted at the end
(--keep keeps it), so every run starts clean; LEASESTORE_DSN is ignored.
With --dsn it runs on that store (PostgreSQL included, migrated beforehand)
in a namespace of its own, demo-XXXXXXXX.`,
		Example: `  leasectl demo
  leasectl demo --dsn postgres://leasestore@db:5432/leases
  leasectl demo -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, temp, cleanup, err := a.demoTarget(cmd, keep)
			if err != nil {
				return err
			}
			defer cleanup()
			counter := &statusCounter{counts: map[string]int64{}}
			s, err := a.openTarget(cmd.Context(), t, openOptions{observer: counter})
			if err != nil {
				return err
			}
			defer s.close(a)
			d := &demo{a: a, rt: s.rt, ns: "demo-" + protocol.RandomRequestID()[:8], ttl: ttl,
				resource: &fencedResource{highest: map[string]int64{}}, counter: counter}
			where := fmt.Sprintf("%s store %s", s.backend, s.shown)
			switch {
			case temp && keep:
				where = fmt.Sprintf("a fresh SQLite file %s (kept: inspect it with --dsn sqlite:%s)", t.path, t.path)
			case temp:
				where = fmt.Sprintf("a fresh SQLite file %s (deleted at the end; --keep keeps it, --dsn picks another store)", t.path)
			}
			return d.run(cmd.Context(), s, where)
		},
	}
	cmd.Flags().Var(newDurationFlag(&ttl, time.Second, 100*time.Millisecond, time.Minute), "ttl", "lease duration of the workers (100ms to 1m)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary SQLite file and print its path")
	return cmd
}

// demoTarget returns the store of the demo: --dsn when given on the command
// line, otherwise a fresh SQLite file in a temporary directory (temp),
// removed by cleanup unless keep.
func (a *app) demoTarget(cmd *cobra.Command, keep bool) (t target, temp bool, cleanup func(), err error) {
	if f := cmd.Flag("dsn"); f != nil && f.Changed {
		t, err := parseDSN(a.dsnFlag)
		return t, false, func() {}, err
	}
	dir, err := os.MkdirTemp("", "leasectl-demo-")
	if err != nil {
		return target{}, false, nil, fmt.Errorf("demo: temporary directory: %w", err)
	}
	cleanup = func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}
	t, err = parseDSN("sqlite:" + filepath.Join(dir, "demo.db"))
	return t, true, cleanup, err
}

// run tells the story. Any deviation from it (which would be a bug in a
// backend) ends the demo with an error.
func (d *demo) run(ctx context.Context, s *store, where string) error {
	d.say("leasestore demo on %s, namespace %s, lease ttl %s", where, d.ns, durations.Format(d.ttl))

	holders, loser, err := d.race(ctx)
	defer func() {
		for _, h := range holders {
			h.stop()
			<-h.held.Done()
		}
	}()
	if err != nil {
		return err
	}
	if loser == "" || len(holders) != 3 {
		return fmt.Errorf("demo: expected three holders and one waiting worker, got %d holders", len(holders))
	}
	a, b, c := holders["shard-a"], holders["shard-b"], holders["shard-c"]

	d.say("")
	d.say("2. The holders write to the fenced resource, each with its token.")
	for _, h := range []*holder{a, b, c} {
		d.write(h.worker, h.shard, h.held.Token())
	}

	d.say("")
	d.say("3. The holders work on, their leases renewed in the background every %s.", durations.Format((d.ttl / 3).Round(time.Millisecond)))
	if err := d.waitRenewed(ctx, a, b, c); err != nil {
		return err
	}
	d.say("   Now %s (shard-a) and %s (shard-c) freeze (a stop-the-world pause, a suspended VM):", a.worker, c.worker)
	d.say("   they stop renewing but still believe they hold their shards. %s keeps renewing shard-b;", b.worker)
	d.say("   %s still wants a shard.", loser)
	a.stop()
	c.stop()

	taken, err := d.takeOver(ctx, loser, "shard-a", a)
	if err != nil {
		return err
	}
	holders["shard-a/"+loser] = taken
	d.write(loser, "shard-a", taken.held.Token())

	d.say("")
	d.say("5. %s wakes up and carries on as if it still held shard-a, with token %d.", a.worker, a.held.Token())
	if d.write(a.worker, "shard-a", a.held.Token()) {
		return errors.New("demo: the resource accepted a stale token")
	}
	if err := d.expect(ctx, a.worker+" renews shard-a", protocol.StatusStaleToken, func(ctx context.Context) protocol.Result {
		res, _ := d.rt.Renew(ctx, protocol.RenewRequest{Key: d.key("shard-a"), Owner: a.worker, Token: a.held.Token(), TTL: d.ttl})
		return res
	}); err != nil {
		return err
	}
	if err := d.expect(ctx, a.worker+" releases shard-a", protocol.StatusStaleToken, func(ctx context.Context) protocol.Result {
		res, _ := d.rt.Release(ctx, protocol.ReleaseRequest{Key: d.key("shard-a"), Owner: a.worker, Token: a.held.Token()})
		return res
	}); err != nil {
		return err
	}
	d.say("   %s's lease, token %d, was untouched by both.", loser, taken.held.Token())

	d.say("")
	d.say("6. %s wakes up too. Nobody wanted shard-c, but its lease ran out all the same.", c.worker)
	if err := d.waitGone(ctx, "shard-c"); err != nil {
		return err
	}
	if err := d.expect(ctx, c.worker+" renews shard-c", protocol.StatusExpired, func(ctx context.Context) protocol.Result {
		res, _ := d.rt.Renew(ctx, protocol.RenewRequest{Key: d.key("shard-c"), Owner: c.worker, Token: c.held.Token(), TTL: d.ttl})
		return res
	}); err != nil {
		return err
	}
	again, err := d.hold(ctx, c.worker, "shard-c")
	if err != nil {
		return fmt.Errorf("demo: %s acquires shard-c again: %w", c.worker, err)
	}
	holders["shard-c/again"] = again
	d.say("   %s acquires shard-c again: token %d, so its old token %d is now fenced off too.", c.worker, again.held.Token(), c.held.Token())
	d.write(c.worker, "shard-c", again.held.Token())

	d.say("")
	d.say("7. An operator revokes %s's shard-b (leasectl revoke shard-b --reason ...).", b.worker)
	rctx, cancel := d.a.opContext(ctx)
	res, _ := d.rt.Revoke(rctx, protocol.RevokeRequest{Key: d.key("shard-b"), Actor: "oncall@example.com",
		Reason: "demo: drain " + b.worker + "'s host", RequestID: ""})
	cancel()
	if res.Status != protocol.StatusRevoked {
		return fmt.Errorf("demo: revoke shard-b answered %s: %s", res.Status, res.Message)
	}
	d.say("   revoke -> %s: %s", res.Status, res.Message)
	select {
	case <-b.held.Context().Done():
		d.say("   %s hears it from the store; its lease context is cancelled: %v", b.worker, context.Cause(b.held.Context()))
	case <-time.After(3 * d.ttl):
		return fmt.Errorf("demo: %s was not told that shard-b was revoked", b.worker)
	case <-ctx.Done():
		return failWith(ctx.Err())
	}

	d.say("")
	d.say("8. The workers still holding leases release them.")
	for _, h := range []*holder{taken, again} {
		rctx, cancel := d.a.opContext(ctx)
		err := h.held.Release(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("demo: %s releases %s: %w", h.worker, h.shard, err)
		}
		d.say("   %s released %s (token %d)", h.worker, h.shard, h.held.Token())
	}
	return d.finish(ctx, s)
}

// hold has worker acquire shard and keep it renewed in the background.
func (d *demo) hold(ctx context.Context, worker, shard string) (*holder, error) {
	hctx, stop := context.WithCancel(ctx)
	h, err := protocol.Hold(hctx, d.rt, protocol.AcquireRequest{Key: d.key(shard), Owner: worker, TTL: d.ttl}, nil)
	if err != nil {
		stop()
		return nil, err
	}
	return &holder{worker: worker, shard: shard, held: h, stop: stop}, nil
}

// race has four workers race for three shards; each tries the shards in
// its own order and keeps the first it gets. The story is told once the
// race is over, in the order the calls returned except that a conflict
// with a holder comes after that holder's acquire, and a worker's "found
// every shard held" after every acquire: told as each call returned, a
// conflict could come before the acquire it met.
func (d *demo) race(ctx context.Context) (map[string]*holder, string, error) {
	d.say("")
	d.say("1. Four workers race for three shards, each wanting one.")
	shards := []string{"shard-a", "shard-b", "shard-c"}
	// raceEvent is one call's outcome: an acquire (holder empty), a
	// conflict with holder, or a worker that found every shard held
	// (shard empty).
	type raceEvent struct {
		worker, shard, holder string
		token                 int64
	}
	var (
		mu      sync.Mutex
		holders = map[string]*holder{}
		events  []raceEvent
		losers  []string
		errs    []error
		wg      sync.WaitGroup
	)
	for i := range 4 {
		worker := fmt.Sprintf("worker-%d", i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range shards {
				shard := shards[(i+j)%len(shards)]
				h, err := d.hold(ctx, worker, shard)
				var pe *protocol.Error
				mu.Lock()
				switch {
				case err == nil:
					events = append(events, raceEvent{worker: worker, shard: shard, token: h.held.Token()})
					holders[shard] = h
					mu.Unlock()
					return
				case errors.As(err, &pe) && pe.Status == protocol.StatusConflict && pe.Lease != nil:
					events = append(events, raceEvent{worker: worker, shard: shard, holder: pe.Lease.Owner, token: pe.Lease.Token})
					mu.Unlock()
				default:
					errs = append(errs, fmt.Errorf("demo: %s acquires %s: %w", worker, shard, err))
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			events = append(events, raceEvent{worker: worker})
			losers = append(losers, worker)
			mu.Unlock()
		}()
	}
	wg.Wait()
	told := map[raceEvent]bool{}
	tellAcquire := func(match func(raceEvent) bool) {
		for _, ev := range events {
			if ev.holder == "" && ev.shard != "" && !told[ev] && match(ev) {
				told[ev] = true
				d.say("   %s acquired %s with token %d", ev.worker, ev.shard, ev.token)
			}
		}
	}
	for _, ev := range events {
		switch {
		case ev.shard == "":
			tellAcquire(func(raceEvent) bool { return true })
			d.say("   %s found every shard held; it will wait for one", ev.worker)
		case ev.holder != "":
			tellAcquire(func(a raceEvent) bool { return a.worker == ev.holder && a.shard == ev.shard && a.token == ev.token })
			d.say("   %s wanted %s: conflict, %s holds it with token %d", ev.worker, ev.shard, ev.holder, ev.token)
		default:
			tellAcquire(func(a raceEvent) bool { return a == ev })
		}
	}
	if len(errs) > 0 {
		return holders, "", failWith(errors.Join(errs...))
	}
	if len(losers) != 1 {
		return holders, "", fmt.Errorf("demo: expected one waiting worker, got %d", len(losers))
	}
	return holders, losers[0], nil
}

// takeOver has worker wait for shard (protocol.Hold with Wait): after its
// conflict it sleeps until the frozen holder's lease runs out or the store
// signals a release, and takes the shard then. No polling.
func (d *demo) takeOver(ctx context.Context, worker, shard string, frozen *holder) (*holder, error) {
	d.say("")
	d.say("4. %s waits for shard-a: it sleeps until the holder's lease ends (or the store signals a release), no polling.", worker)
	lease := frozen.held.Lease()
	d.say("   %s holds it with token %d until %s", lease.Owner, lease.Token, lease.ExpiresAt.UTC().Format("15:04:05.000"))
	hctx, stop := context.WithCancel(ctx)
	// The frozen lease runs out after its TTL; give up well after that.
	watchdog := time.AfterFunc(5*d.ttl+5*time.Second, stop)
	held, err := protocol.Hold(hctx, d.rt, protocol.AcquireRequest{Key: d.key(shard), Owner: worker, TTL: d.ttl},
		&protocol.HoldConfig{Wait: &protocol.WaitConfig{}})
	watchdog.Stop()
	if err != nil {
		stop()
		if ctx.Err() != nil {
			return nil, failWith(ctx.Err())
		}
		return nil, failWith(fmt.Errorf("demo: %s waits for %s: %w", worker, shard, err))
	}
	h := &holder{worker: worker, shard: shard, held: held, stop: stop}
	d.say("   %s acquired %s with token %d once %s's lease ran out, greater than its %d", worker, shard, held.Token(), frozen.worker, frozen.held.Token())
	if held.Token() <= frozen.held.Token() {
		return h, errors.New("demo: the new token is not greater than the old one")
	}
	return h, nil
}

// waitRenewed waits until each holder's lease has been renewed at least
// once in the background.
func (d *demo) waitRenewed(ctx context.Context, hs ...*holder) error {
	deadline := time.Now().Add(5*d.ttl + 5*time.Second)
	for _, h := range hs {
		for h.held.Lease().RenewedAt.Equal(h.held.Lease().AcquiredAt) {
			if err := h.held.Context().Err(); err != nil {
				return fmt.Errorf("demo: %s lost %s: %w", h.worker, h.shard, context.Cause(h.held.Context()))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("demo: %s's lease on %s was not renewed", h.worker, h.shard)
			}
			select {
			case <-ctx.Done():
				return failWith(ctx.Err())
			case <-time.After(d.ttl / 20):
			}
		}
		l := h.held.Lease()
		d.say("   %s renewed %s: token %d, now until %s", h.worker, h.shard, l.Token, l.ExpiresAt.UTC().Format("15:04:05.000"))
	}
	return nil
}

// waitGone polls get until the store (by its own clock) sees no live lease
// on shard.
func (d *demo) waitGone(ctx context.Context, shard string) error {
	deadline := time.Now().Add(5*d.ttl + 5*time.Second)
	for {
		gctx, cancel := d.a.opContext(ctx)
		res, _ := d.rt.Get(gctx, protocol.GetRequest{Key: d.key(shard)})
		cancel()
		switch {
		case res.Status == protocol.StatusNotFound:
			return nil
		case res.Status != protocol.StatusFound:
			return fmt.Errorf("demo: get %s answered %s: %s", shard, res.Status, res.Message)
		case time.Now().After(deadline):
			return fmt.Errorf("demo: the lease on %s did not run out", shard)
		}
		select {
		case <-ctx.Done():
			return failWith(ctx.Err())
		case <-time.After(d.ttl / 10):
		}
	}
}

// expect runs one operation and checks its status.
func (d *demo) expect(ctx context.Context, what string, want protocol.Status, run func(context.Context) protocol.Result) error {
	octx, cancel := d.a.opContext(ctx)
	res := run(octx)
	cancel()
	d.say("   %s -> %s: %s", what, res.Status, d.a.red.redact(res.Message))
	if res.Status != want {
		return fmt.Errorf("demo: %s answered %s, expected %s", what, res.Status, want)
	}
	return nil
}

// finish prints the summary and the audit trail of the demo's namespace.
func (d *demo) finish(ctx context.Context, s *store) error {
	var recs []audit.Record
	q := audit.Query{Namespace: d.ns, Limit: audit.MaxLimit}
	for {
		actx, cancel := d.a.opContext(ctx)
		page, err := s.audit.ReadAudit(actx, q)
		cancel()
		if err != nil {
			return failWith(fmt.Errorf("demo: read the audit trail: %w", err))
		}
		recs = append(recs, page.Records...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	outcomes := d.counter.snapshot()
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, outcomes[k]))
	}
	d.say("")
	d.say("Summary: resource writes accepted=%d fenced=%d; outcomes (background renewals included):", d.accepted, d.fenced)
	d.say("   %s", strings.Join(parts, " "))
	d.say("Every state change is in the append-only audit trail (%d records):", len(recs))
	if d.a.output == "json" {
		out := demoJSON{
			Status: StatusOK, Backend: s.backend, Store: s.shown, Namespace: d.ns, Story: d.story,
			Outcomes: outcomes, Writes: map[string]int64{"accepted": d.accepted, "fenced": d.fenced},
			Records: []recordJSON{},
		}
		for _, r := range recs {
			out.Records = append(out.Records, toRecordJSON(r))
		}
		d.a.printJSON(out)
		return nil
	}
	d.a.printText(formatRecords(recs, false))
	return nil
}
