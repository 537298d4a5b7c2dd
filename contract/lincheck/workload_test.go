package lincheck_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
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
			b := memstore.New(nil)
			rt := protocol.New(b, nil)
			defer rt.Close(context.Background())
			want := lincheck.ErrNotLinearizable
			if c.name == "correct" {
				want = nil
			}
			checkCaught(t, c.broken(rt), b, want, 600)
		})
	}
	// The backends of internal/brokenstore: the model fails on those that
	// bend what it checks, CheckAudit on those that bend the audit trail.
	for _, c := range []struct {
		kind brokenstore.Kind
		want error
	}{
		{brokenstore.Correct, nil},
		{brokenstore.ReissueAfterRelease, lincheck.ErrNotLinearizable},
		{brokenstore.ReissueAfterExpiry, lincheck.ErrNotLinearizable},
		{brokenstore.ReissueAfterRevoke, lincheck.ErrNotLinearizable},
		{brokenstore.DoubleGrant, lincheck.ErrNotLinearizable},
		{brokenstore.RenewAfterExpiry, lincheck.ErrNotLinearizable},
		{brokenstore.StaleRelease, lincheck.ErrNotLinearizable},
		{brokenstore.ReplayCurrent, lincheck.ErrNotLinearizable},
		{brokenstore.LockDelayIgnored, lincheck.ErrNotLinearizable},
		{brokenstore.LockDelayTooLong, lincheck.ErrNotLinearizable},
		{brokenstore.EarlyExpiry, lincheck.ErrNotLinearizable},
		{brokenstore.TimeoutRunsTwice, lincheck.ErrNotLinearizable},
		{brokenstore.UncommittedRelease, lincheck.ErrNotLinearizable},
		{brokenstore.AuditMissing, lincheck.ErrAuditMismatch},
		{brokenstore.AuditForRefusal, lincheck.ErrAuditMismatch},
		{brokenstore.AuditWrongToken, lincheck.ErrAuditMismatch},
	} {
		t.Run("brokenstore "+string(c.kind), func(t *testing.T) {
			t.Parallel()
			every, ops := 1, 600
			switch c.kind {
			case brokenstore.TimeoutRunsTwice:
				every = 4 // each time out costs a retry's pause
			case brokenstore.ReplayCurrent:
				// Shows only when the key changed between a lost answer
				// and its retry: 600 operations missed it in 3 runs of 60.
				ops = 3000
			}
			h := brokenstore.New(c.kind, &brokenstore.Config{Every: every, Skew: 20 * time.Millisecond}).Handle()
			rt := protocol.New(h, nil)
			defer rt.Close(context.Background())
			checkCaught(t, rt, h, c.want, ops)
		})
	}
}

// checkCaught runs the workload on s and checks the history, and the
// audit trail that r reads against it: both must pass when want is nil,
// and the check that answers want must fail otherwise.
func checkCaught(t *testing.T, s protocol.Store, r audit.Reader, want error, ops int) {
	t.Helper()
	rec := lincheck.NewRecorder("p", nil)
	w := lincheck.Workload{Store: s, Recorder: rec, Clients: 4, Ops: ops, Seed: 7, LoseAnswers: 0.1,
		LockDelay: 20 * time.Millisecond}
	stats, err := w.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := lincheck.Check(rec.History(), &lincheck.CheckOptions{Dir: t.TempDir()})
	t.Logf("%v; %v", stats, res)
	aerr := lincheck.CheckAudit(t.Context(), rec.History(), r)
	switch want {
	case nil:
		if err != nil {
			t.Fatal(err)
		}
		if aerr != nil {
			t.Fatal(aerr)
		}
	case lincheck.ErrNotLinearizable:
		if !errors.Is(err, want) {
			t.Fatalf("Check: %v, want %v", err, want)
		}
		t.Log(err)
	default:
		if !errors.Is(aerr, want) {
			t.Fatalf("CheckAudit: %v, want %v", aerr, want)
		}
		t.Log(aerr)
	}
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
