package audit_test

import (
	"math"
	"testing"

	"github.com/leasestore/leasestore/audit"
)

// FuzzQueryCursor: a cursor a query accepts is one the same order encodes,
// for exactly the id range it reads; anything else is refused.
func FuzzQueryCursor(f *testing.F) {
	for _, c := range []string{"", "a1.0", "a1.7", "a1n.7", "a1n.0", "a1.9223372036854775807", "a1.-1", "a1.+5", "a1.007", "a1n.", "l1.x", "a1n.a1.5", "a1.7.0", "a1.7.3", "a1.7.", "a1.7.03", "a1.7.-1", "a1.7.3.1", "a1n.7.3"} {
		f.Add(c, false)
		f.Add(c, true)
	}
	f.Fuzz(func(t *testing.T, c string, newest bool) {
		q := audit.Query{Cursor: c, Newest: newest}
		after, before, err := q.IDRange()
		if (err == nil) != (q.Validate() == nil) {
			t.Fatalf("cursor %q (newest %t): IDRange error %v, Validate error %v", c, newest, err, q.Validate())
		}
		if err != nil {
			return
		}
		switch {
		case c == "":
			if after != 0 || before != math.MaxInt64 {
				t.Fatalf("no cursor: ids (%d, %d)", after, before)
			}
		case newest:
			if after != 0 || before < 0 || q.NextCursor(before) != c || !audit.IsNewestCursor(c) {
				t.Fatalf("newest-first cursor %q: ids (%d, %d), encoded again %q", c, after, before, q.NextCursor(before))
			}
		default:
			id, err := audit.DecodeCursor(c)
			again := audit.EncodeCursor(after)
			if n, ok := audit.CursorPrunedBy(c); ok {
				again = audit.EncodePrunedCursor(after, n)
			}
			if err != nil || id != after || before != math.MaxInt64 || again != c || audit.IsNewestCursor(c) {
				t.Fatalf("oldest-first cursor %q: ids (%d, %d), decoded %d, %v, encoded again %q", c, after, before, id, err, again)
			}
		}
	})
}
