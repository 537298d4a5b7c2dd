package audit_test

import (
	"errors"
	"testing"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// CheckPruned refuses a read from a cursor below the greatest id a prune
// removed, a1.0 included: it is a position (audit.Tail's of an empty
// trail), not the start, which is no cursor.
func TestCheckPrunedJudgesEveryCursor(t *testing.T) {
	t.Parallel()
	const through = 5
	for _, c := range []struct {
		q      audit.Query
		pruned bool
	}{
		{audit.Query{}, false},
		{audit.Query{Follow: true}, false},
		{audit.Query{Cursor: audit.EncodeCursor(0)}, true},
		{audit.Query{Namespace: "ns", Follow: true, Cursor: audit.EncodeCursor(0)}, true},
		{audit.Query{Cursor: audit.EncodeCursor(4)}, true},
		{audit.Query{Cursor: audit.EncodeCursor(5)}, false},
		{audit.Query{Cursor: audit.EncodeCursor(6)}, false},
		{audit.Query{Newest: true, Cursor: audit.EncodeNewestCursor(1)}, false},
	} {
		err := audit.CheckPruned(c.q, through)
		if got := err != nil; got != c.pruned {
			t.Errorf("CheckPruned(%+v, %d) = %v; want pruned %v", c.q, through, err, c.pruned)
			continue
		}
		if err != nil && (!errors.Is(err, audit.ErrPruned) || !errors.Is(err, protocol.ErrUnavailable)) {
			t.Errorf("CheckPruned(%+v, %d) = %v; want unavailable matching ErrPruned", c.q, through, err)
		}
	}
	// A cursor with a prune batch's id (PostgreSQL, a follower that
	// started after a prune at a position below it) is refused only when
	// the last batch differs since; one without keeps the rule above, and
	// so does CheckPruned, which reads no batch (SQLite, etcd).
	const prunes = 3
	for _, c := range []struct {
		q      audit.Query
		pruned bool
	}{
		{audit.Query{Follow: true, Cursor: audit.EncodePrunedCursor(4, 3)}, false},
		{audit.Query{Follow: true, Cursor: audit.EncodePrunedCursor(0, 3)}, false},
		{audit.Query{Follow: true, Cursor: audit.EncodePrunedCursor(4, 2)}, true},
		{audit.Query{Follow: true, Cursor: audit.EncodePrunedCursor(4, 0)}, true},
		{audit.Query{Follow: true, Cursor: audit.EncodePrunedCursor(6, 2)}, false},
		{audit.Query{Follow: true, Cursor: audit.EncodeCursor(4)}, true},
		{audit.Query{Follow: true, Cursor: audit.EncodeCursor(5)}, false},
		{audit.Query{Follow: true}, false},
	} {
		err := audit.CheckPrunedBy(c.q, through, prunes)
		if got := err != nil; got != c.pruned {
			t.Errorf("CheckPrunedBy(%+v, %d, %d) = %v; want pruned %v", c.q, through, prunes, err, c.pruned)
		}
		if err != nil && !errors.Is(err, audit.ErrPruned) {
			t.Errorf("CheckPrunedBy(%+v, %d, %d) = %v; want it matching ErrPruned", c.q, through, prunes, err)
		}
	}
	if err := audit.CheckPruned(audit.Query{Cursor: audit.EncodePrunedCursor(4, 3)}, through); err == nil {
		t.Error("CheckPruned from a counted cursor below through: nil; want it refused as any cursor below through")
	}
	// A trail no prune touched has nothing to miss.
	if err := audit.CheckPruned(audit.Query{Cursor: audit.EncodeCursor(0)}, 0); err != nil {
		t.Errorf("CheckPruned from a1.0 of an unpruned trail: %v", err)
	}
}
