package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// rev64: a follower of a namespace whose cursor is behind a prune resumes
// past the records the prune removed, without an error and without any
// sign of the gap (the prune's own record belongs to no namespace, so a
// namespace's follower never sees it). DESIGN.md: a follower paging by
// cursor never skips a record; etcd's follower stops with ErrCompacted
// rather than leave a silent gap.
func TestRev64FollowerBehindAPruneSkipsSilently(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns", Follow: true}
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID) // the follower has read the acquire
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: time.Hour,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	clock.Advance(time.Minute)
	pr, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.ReadAudit(ctx, q)
	if err == nil && len(next.Records) == 0 {
		t.Fatalf("follower at %s after a prune that removed %d records (3 of them after its cursor): "+
			"page %+v, no error: the renews it never read are gone without a trace", q.Cursor, pr.Removed, next)
	}
}
