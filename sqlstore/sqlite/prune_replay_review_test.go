package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// A prune's cut-off after the store's time is refused because it "would
// remove the records of operations that just committed: the retry of an
// acquire whose answer was lost would then answer conflict instead of its
// replay" (contract's prune_refuses_a_cut_off_after_the_store_time). A
// cut-off of the store's time itself (`leasectl audit prune --before 0s
// --yes`), or a second before it, is accepted and does exactly that: the
// acquire's record, which its retry is answered from, is gone while the
// lease it granted is still held.
func TestAPruneKeepsTheRecordARetryOfALiveLeaseIsAnsweredFrom(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	req := protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "answer-lost"}
	first, err := b.Acquire(ctx, req)
	wantStatus(t, "acquire", first, err, protocol.StatusAcquired)
	clock.Advance(time.Second)
	if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"}); err != nil {
		t.Fatalf("prune up to the store's time: %v", err)
	}
	retry, err := b.Acquire(ctx, req)
	if err != nil || retry.Status != protocol.StatusAcquired || !retry.Replayed || retry.Lease == nil ||
		retry.Lease.Token != first.Lease.Token {
		t.Fatalf("retry of an acquire (its lease held for another %v) after a prune up to the store's time: "+
			"status %q replayed=%v (%s), %v; want the replay of token %d", time.Hour-time.Second, retry.Status,
			retry.Replayed, retry.Message, err, first.Lease.Token)
	}
}
