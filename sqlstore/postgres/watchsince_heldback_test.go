package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// commitAfterFirstRead is the backend's audit reader, which commits an open
// transaction once its first read has answered: as another session's
// transaction ends while a watch starts.
type commitAfterFirstRead struct {
	audit.Reader
	once   sync.Once
	commit func()
}

func (r *commitAfterFirstRead) ReadAudit(ctx context.Context, q audit.Query) (audit.Page, error) {
	page, err := r.Reader.ReadAudit(ctx, q)
	r.once.Do(r.commit)
	return page, err
}

// TestWatchSinceMissesNoRecordHeldBackAtItsStart: a watch --since T
// (audit.Start) whose first read finds no record at or after T because one
// is held back (a transaction of the cluster older than it still open)
// starts before that record, not after it. It fell back to the end of the
// trail, read a moment later, when the transaction had ended: the record
// was past, and the watch never printed it (leasectl watch --since, CI).
func TestWatchSinceMissesNoRecordHeldBackAtItsStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	key := protocol.Key{Namespace: "w", Name: "before"}
	if res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "o", TTL: time.Hour}); err != nil {
		t.Fatalf("acquire %s: %+v, %v", key, res, err)
	}
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	time.Sleep(50 * time.Millisecond)

	// Older than the record to come, open: followers read below it.
	conn := rawConn(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	other := protocol.Key{Namespace: "w", Name: "other"}
	if res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: other, Owner: "o", TTL: time.Hour}); err != nil {
		t.Fatalf("acquire %s: %+v, %v", other, res, err)
	}

	r := &commitAfterFirstRead{Reader: b, commit: func() {
		if err := tx.Commit(ctx); err != nil {
			t.Errorf("commit the open transaction: %v", err)
		}
	}}
	q := audit.Query{Namespace: "w", Since: since}
	cursor, err := audit.Start(ctx, r, q, nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	// Read on from there as a watch does: another test's transaction of
	// the shared cluster, open at a read, may hold the record back again,
	// so read until it comes out (a watch started past it never sees it).
	var page audit.Page
	for deadline := time.Now().Add(20 * time.Second); ; {
		if page, err = b.ReadAudit(ctx, audit.Query{Namespace: "w", Cursor: cursor, Follow: true}); err != nil {
			t.Fatalf("read from %s: %v", cursor, err)
		}
		for _, rec := range page.Records {
			if rec.Key == "other" && rec.Op == "acquire" {
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("a watch of namespace w since %s started at %s, past the acquire of other (committed after since, held back "+
		"at the watch's first read): read on from there for 20s, %d records, none of them that acquire", since.Format(time.RFC3339Nano), cursor, len(page.Records))
}
