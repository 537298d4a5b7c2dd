package audit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
)

// recordingPruner records the prunes asked of it.
type recordingPruner struct {
	mu   sync.Mutex
	reqs []audit.PruneRequest
	fail bool
}

func (p *recordingPruner) PruneAudit(_ context.Context, r audit.PruneRequest) (audit.PruneResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, r)
	if p.fail {
		return audit.PruneResult{}, errors.New("store down")
	}
	return audit.PruneResult{Removed: 1}, nil
}

func (p *recordingPruner) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// Retain prunes at once and then every Every, each time with the cut-off
// now minus Keep, the retention actor and a request id of its own; a
// failed prune does not stop it; it returns when its context ends.
func TestRetain(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		p := &recordingPruner{fail: fail}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- audit.Retain(ctx, p, audit.RetainConfig{Keep: time.Hour, Every: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
		for p.count() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Retain returned %v", err)
		}
		p.mu.Lock()
		ids := map[string]bool{}
		for _, r := range p.reqs {
			if d := start.Add(-time.Hour).Sub(r.Before); d > time.Second || d < -time.Minute {
				t.Errorf("cut-off %v, want about an hour before %v", r.Before, start)
			}
			if r.Actor != audit.DefaultRetainActor || r.RequestID == "" || ids[r.RequestID] {
				t.Errorf("prune request %+v", r)
			}
			ids[r.RequestID] = true
		}
		p.mu.Unlock()
	}
	if err := audit.Retain(context.Background(), &recordingPruner{}, audit.RetainConfig{}); err == nil {
		t.Error("Retain without Keep did not refuse")
	}
}
