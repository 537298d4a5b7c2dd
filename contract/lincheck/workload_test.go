package lincheck_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/internal/brokenstore"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// stealing is a broken store: an acquire that meets a live lease sometimes
// revokes it behind everyone's back and acquires, so that two clients
// believe they hold the key.
type stealing struct {
	protocol.Store
	n atomic.Int64
}

func (s *stealing) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := s.Store.Acquire(ctx, req)
	if res.Status != protocol.StatusConflict || s.n.Add(1)%5 != 0 {
		return res, err
	}
	if _, err := s.Store.Revoke(ctx, protocol.RevokeRequest{Key: req.Key, Actor: "thief", Reason: "bug"}); err != nil {
		return res, err
	}
	return s.Store.Acquire(ctx, req)
}

// lying is a broken store whose renew of a stale token sometimes answers
// renewed, as a backend that compared tokens with >= would.
type lying struct {
	protocol.Store
	n atomic.Int64
}

func (s *lying) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := s.Store.Renew(ctx, req)
	if res.Status != protocol.StatusStaleToken || s.n.Add(1)%3 != 0 {
		return res, err
	}
	l := *res.Lease
	l.Owner, l.Token, l.ExpiresAt = req.Owner, req.Token, time.Now().Add(req.TTL)
	return protocol.Result{Op: protocol.OpRenew, Status: protocol.StatusRenewed, Lease: &l, RequestID: req.RequestID}, nil
}

// forgetful is a broken store that ignores request ids: a retry runs
// again instead of answering the first outcome.
type forgetful struct{ protocol.Store }

func (s forgetful) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	req.RequestID = ""
	return s.Store.Acquire(ctx, req)
}

func (s forgetful) Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error) {
	req.RequestID = ""
	return s.Store.Release(ctx, req)
}

// The workload and the checker together catch a broken store, and pass
// the correct one it wraps.
func TestWorkloadCatchesBrokenStores(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		broken func(protocol.Store) protocol.Store
	}{
		{"correct", func(s protocol.Store) protocol.Store { return s }},
		{"acquire steals live leases", func(s protocol.Store) protocol.Store { return &stealing{Store: s} }},
		{"renew accepts stale tokens", func(s protocol.Store) protocol.Store { return &lying{Store: s} }},
		{"retries run again", func(s protocol.Store) protocol.Store { return forgetful{s} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := protocol.New(memstore.New(nil), nil)
			defer rt.Close(context.Background())
			checkCaught(t, c.broken(rt), c.name == "correct")
		})
	}
	// The backends of internal/brokenstore that bend what the model
	// checks, on every occasion (but timeouts).
	for _, kind := range []brokenstore.Kind{brokenstore.Correct, brokenstore.ReissueAfterRelease, brokenstore.ReissueAfterExpiry,
		brokenstore.ReissueAfterRevoke, brokenstore.DoubleGrant, brokenstore.RenewAfterExpiry, brokenstore.StaleRelease,
		brokenstore.ReplayCurrent, brokenstore.LockDelayIgnored, brokenstore.LockDelayTooLong, brokenstore.EarlyExpiry,
		brokenstore.TimeoutRunsTwice, brokenstore.UncommittedRelease} {
		t.Run("brokenstore "+string(kind), func(t *testing.T) {
			t.Parallel()
			every := 1
			if kind == brokenstore.TimeoutRunsTwice {
				every = 4 // each time out costs a retry's pause
			}
			rt := protocol.New(brokenstore.New(kind, &brokenstore.Config{Every: every, Skew: 20 * time.Millisecond}).Handle(), nil)
			defer rt.Close(context.Background())
			checkCaught(t, rt, kind == brokenstore.Correct)
		})
	}
}

// checkCaught runs the workload on s and checks the history: it must be
// linearizable when correct, and must not be otherwise.
func checkCaught(t *testing.T, s protocol.Store, correct bool) {
	t.Helper()
	rec := lincheck.NewRecorder("p", nil)
	w := lincheck.Workload{Store: s, Recorder: rec, Clients: 4, Ops: 600, Seed: 7, LoseAnswers: 0.1,
		LockDelay: 20 * time.Millisecond}
	stats, err := w.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := lincheck.Check(rec.History(), &lincheck.CheckOptions{Dir: t.TempDir()})
	t.Logf("%v; %v", stats, res)
	if correct {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if !errors.Is(err, lincheck.ErrNotLinearizable) {
		t.Fatalf("Check: %v, want ErrNotLinearizable", err)
	}
	t.Log(err)
}

// Every status a backend answers comes up in a run, so that the check
// covers them. Expiry depends on timing, so the test runs the workload
// again (a fresh history each time) until every status came up.
func TestWorkloadCoversTheVocabulary(t *testing.T) {
	t.Parallel()
	want := []string{
		"acquire acquired", "acquire conflict", "renew renewed", "renew expired", "renew stale_token",
		"renew not_owner", "renew not_found", "release released", "release expired", "release stale_token",
		"release not_owner", "release not_found", "get found", "get not_found", "revoke revoked",
		"revoke not_found", "revoke stale_token", "revoke not_owner",
	}
	seen := map[string]int{}
	replayed, unknown := 0, 0
	for run := 1; ; run++ {
		rt := protocol.New(memstore.New(nil), nil)
		rec := lincheck.NewRecorder(fmt.Sprintf("p%d", run), nil)
		// Many keys and very short TTLs: leases expire before anyone takes
		// the key again, so that renew and release can answer expired.
		w := lincheck.Workload{Store: rt, Recorder: rec, Clients: 4, Ops: 3000, ShortTTL: 2 * time.Millisecond,
			Keys: []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}, LoseAnswers: 0.02}
		stats, err := w.Run(t.Context())
		if cerr := rt.Close(context.Background()); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if stats.Ops != 3000 {
			t.Fatalf("%d operations, want 3000", stats.Ops)
		}
		res, err := lincheck.Check(rec.History(), &lincheck.CheckOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v; %v", stats, res)
		replayed += stats.Replayed
		unknown += stats.Unknown
		var missing []string
		for _, k := range want {
			seen[k] += stats.Outcomes[k]
			if seen[k] == 0 {
				missing = append(missing, k)
			}
		}
		if replayed == 0 {
			missing = append(missing, "a replay")
		}
		if unknown == 0 {
			missing = append(missing, "an unknown outcome")
		}
		if len(missing) == 0 {
			return
		}
		if run == 5 {
			t.Fatalf("after %d runs, never: %v", run, missing)
		}
	}
}
