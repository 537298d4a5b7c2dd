// Package prunerace runs two prunes with one request id at once, the
// first held between its batches (a client retrying a prune that timed out
// while the first still runs), and checks what the SQL backends promise of
// them: exactly one prunes, and its record counts every record removed;
// the other removes nothing and is refused as a use of the request id.
package prunerace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// Gate holds the first prune batch boundary it is called at until Resume;
// later calls pass. Give Between to the backend's hook that runs between a
// prune's batches.
type Gate struct {
	armed        atomic.Bool
	held, resume chan struct{}
}

// NewGate returns a Gate that holds the first call of Between.
func NewGate() *Gate {
	g := &Gate{held: make(chan struct{}), resume: make(chan struct{})}
	g.armed.Store(true)
	return g
}

// Between holds its first caller until Resume; it returns at once to
// every later one.
func (g *Gate) Between() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.resume
	}
}

// Resume lets the held caller go on.
func (g *Gate) Resume() { close(g.resume) }

// outcome is what one prune answered.
type outcome struct {
	res audit.PruneResult
	err error
}

// Run sends req to p, holds it at g after its first batch, sends req
// again meanwhile (on p too: the held prune is between transactions, so
// nothing of it blocks the second), then lets the first go on, and checks
// the outcome. older is how many records of the trail are older than
// req.Before; the batch size must be smaller, so that the first prune
// has a batch after its first. r reads the trail afterwards.
func Run(t *testing.T, ctx context.Context, p audit.Pruner, r audit.Reader, g *Gate, req audit.PruneRequest, older int64) {
	t.Helper()
	firstDone := make(chan outcome, 1)
	go func() {
		res, err := p.PruneAudit(ctx, req)
		firstDone <- outcome{res, err}
	}()
	select {
	case <-g.held:
	case o := <-firstDone:
		t.Fatalf("the first prune ended before its second batch: removed %d, %v", o.res.Removed, o.err)
	}
	res, err := p.PruneAudit(ctx, req)
	second := outcome{res, err}
	g.Resume()
	first := <-firstDone

	trail := readAll(t, ctx, r)
	var reasons []string
	var left int
	for _, rec := range trail {
		if rec.Op == audit.OpPrune && rec.RequestID == req.RequestID {
			reasons = append(reasons, rec.Reason)
		}
		if rec.At.Before(req.Before) {
			left++
		}
	}
	t.Logf("first prune: removed %d, %v; second prune: removed %d, %v; prune records of %q: %q; %d records before the cut-off left",
		first.res.Removed, first.err, second.res.Removed, second.err, req.RequestID, reasons, left)
	want := fmt.Sprintf("removed %d records before", older)
	if len(reasons) != 1 || !strings.HasPrefix(reasons[0], want) {
		t.Fatalf("the trail's prune records of %q say %q; want one, beginning %q (the first prune removed %d, the second %d)",
			req.RequestID, reasons, want, first.res.Removed, second.res.Removed)
	}
	if left != 0 {
		t.Fatalf("%d records before the cut-off are left; want none", left)
	}
	won, lost := first, second
	if first.err != nil {
		won, lost = second, first
	}
	if won.err != nil || won.res.Removed != older || !strings.HasPrefix(won.res.Record.Reason, want) ||
		won.res.Record.RequestID != req.RequestID {
		t.Fatalf("the prune that removed records: removed %d, %v, its record %+v; want %d removed and recorded under %q",
			won.res.Removed, won.err, won.res.Record, older, req.RequestID)
	}
	if !errors.Is(lost.err, protocol.ErrInvalid) || !strings.Contains(lost.err.Error(), "already used") || lost.res.Removed != 0 {
		t.Fatalf("the other prune: removed %d, %v; want nothing removed and invalid (request id already used)",
			lost.res.Removed, lost.err)
	}
}

// readAll returns the whole trail, oldest first.
func readAll(t *testing.T, ctx context.Context, r audit.Reader) []audit.Record {
	t.Helper()
	var all []audit.Record
	q := audit.Query{Limit: audit.MaxLimit}
	for {
		page, err := r.ReadAudit(ctx, q)
		if err != nil {
			t.Fatalf("read the trail: %v", err)
		}
		all = append(all, page.Records...)
		if page.NextCursor == "" {
			return all
		}
		q.Cursor = page.NextCursor
	}
}

// RunCutOff sends req to p under a context that ends while p is held at
// g after its first batch (batch records removed), then sends req again:
// the prune that stopped early freed its claim on the request id, so the
// second runs and removes the older-batch records left.
func RunCutOff(t *testing.T, ctx context.Context, p audit.Pruner, g *Gate, req audit.PruneRequest, older, batch int64) {
	t.Helper()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan outcome, 1)
	go func() {
		res, err := p.PruneAudit(pctx, req)
		done <- outcome{res, err}
	}()
	select {
	case <-g.held:
	case o := <-done:
		t.Fatalf("the prune ended before its second batch: removed %d, %v", o.res.Removed, o.err)
	}
	cancel()
	g.Resume()
	if o := <-done; o.err == nil || o.res.Removed != batch {
		t.Fatalf("the prune cut off after its first batch: removed %d, %v; want %d removed and an error", o.res.Removed, o.err, batch)
	}
	res, err := p.PruneAudit(ctx, req)
	if err != nil || res.Removed != older-batch {
		t.Fatalf("the prune sent again with its request id: removed %d, %v; want the %d records left", res.Removed, err, older-batch)
	}
}

// RunAbandoned sends req to p, and while p is held at g after its first
// batch, stop makes p's store unusable (as when its process dies), so
// that the prune can neither go on nor free its claim. The same request
// id sent to other (another handle on the store) is refused as used,
// having removed nothing.
func RunAbandoned(t *testing.T, ctx context.Context, p, other audit.Pruner, g *Gate, req audit.PruneRequest, stop func()) {
	t.Helper()
	done := make(chan outcome, 1)
	go func() {
		res, err := p.PruneAudit(ctx, req)
		done <- outcome{res, err}
	}()
	select {
	case <-g.held:
	case o := <-done:
		t.Fatalf("the prune ended before its second batch: removed %d, %v", o.res.Removed, o.err)
	}
	stop()
	g.Resume()
	if o := <-done; o.err == nil {
		t.Fatalf("the prune whose store went away: removed %d, no error", o.res.Removed)
	}
	res, err := other.PruneAudit(ctx, req)
	if !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "already used") || res.Removed != 0 {
		t.Fatalf("a prune with the request id of one that died after its first batch: removed %d, %v; "+
			"want nothing removed and invalid (request id already used)", res.Removed, err)
	}
}
