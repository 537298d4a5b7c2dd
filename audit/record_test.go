package audit_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestQueryValidate(t *testing.T) {
	valid := []audit.Query{
		{},
		{Namespace: "ns"},
		{Namespace: "ns", Key: "job-1"},
		{Namespace: "ns", Since: time.Now(), Limit: audit.MaxLimit, Cursor: audit.EncodeCursor(42)},
		{Limit: 1},
	}
	for _, q := range valid {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", q, err)
		}
	}
	invalid := []struct {
		q    audit.Query
		want string
	}{
		{audit.Query{Key: "job-1"}, "audit: a key filter needs a namespace"},
		{audit.Query{Namespace: "n\x00s"}, "namespace: control character"},
		{audit.Query{Namespace: strings.Repeat("n", protocol.MaxNamespaceLen+1)}, "namespace:"},
		{audit.Query{Namespace: "ns", Key: "\xff"}, "key: not valid UTF-8"},
		{audit.Query{Namespace: "ns", Key: strings.Repeat("k", protocol.MaxNameLen+1)}, "key:"},
		{audit.Query{Limit: -1}, "limit: -1 is outside [0, 1000]"},
		{audit.Query{Limit: audit.MaxLimit + 1}, "limit: 1001"},
		{audit.Query{Cursor: "c1.YQ"}, "cursor: not an audit cursor"},
		{audit.Query{Cursor: "a1.x"}, "cursor: malformed"},
	}
	for _, tc := range invalid {
		err := tc.q.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
	// Every problem is reported at once.
	err := audit.Query{Key: "\xff", Limit: -1, Cursor: "bad"}.Validate()
	for _, want := range []string{"needs a namespace", "key:", "limit:", "cursor:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() of a query wrong everywhere = %v, want it to mention %q", err, want)
		}
	}
}

func TestQueryEffectiveLimit(t *testing.T) {
	if got := (audit.Query{}).EffectiveLimit(); got != audit.DefaultLimit {
		t.Errorf("EffectiveLimit() of a zero limit = %d, want %d", got, audit.DefaultLimit)
	}
	if got := (audit.Query{Limit: 5}).EffectiveLimit(); got != 5 {
		t.Errorf("EffectiveLimit() = %d, want 5", got)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, id := range []int64{0, 1, 42, 1 << 40, math.MaxInt64} {
		c := audit.EncodeCursor(id)
		got, err := audit.DecodeCursor(c)
		if err != nil || got != id {
			t.Errorf("DecodeCursor(EncodeCursor(%d)) = %d, %v", id, got, err)
		}
	}
	if got := audit.EncodeCursor(7); got != "a1.7" {
		t.Errorf("EncodeCursor(7) = %q, want %q", got, "a1.7")
	}
	for _, c := range []string{"", "a1.", "a1", "7", "a2.7", "c1.7", "a1.-1", "a1.x", "a1.7x", "a1. 7", "a1.9223372036854775808", "a1.0x10", "a1.+5", "a1.007", "a1.-0"} {
		if id, err := audit.DecodeCursor(c); err == nil {
			t.Errorf("DecodeCursor(%q) = %d, nil; want an error", c, id)
		} else if !strings.HasPrefix(err.Error(), "cursor: ") {
			t.Errorf("DecodeCursor(%q) error %q lacks the noun prefix", c, err)
		}
	}
	// A follower's cursor below a prune carries the id of the last prune
	// batch (PostgreSQL), strictly: anything else after the id is
	// malformed, and a newest-first cursor carries none.
	if got := audit.EncodePrunedCursor(7, 3); got != "a1.7.3" {
		t.Errorf("EncodePrunedCursor(7, 3) = %q, want %q", got, "a1.7.3")
	}
	for _, tc := range []struct {
		c       string
		id, n   int64
		counted bool
	}{{"a1.7", 7, 0, false}, {"a1.7.0", 7, 0, true}, {"a1.7.3", 7, 3, true}, {"a1.0.9223372036854775807", 0, math.MaxInt64, true}} {
		id, err := audit.DecodeCursor(tc.c)
		n, counted := audit.CursorPrunedBy(tc.c)
		if err != nil || id != tc.id || n != tc.n || counted != tc.counted {
			t.Errorf("%q: DecodeCursor = %d, %v; CursorPrunedBy = %d, %v; want %d, nil; %d, %v", tc.c, id, err, n, counted, tc.id, tc.n, tc.counted)
		}
	}
	for _, c := range []string{"a1.7.", "a1.7.x", "a1.7.-1", "a1.7.03", "a1.7.+3", "a1.7.3.1", "a1.7..3", "a1..3", "a1.7.9223372036854775808", "a1n.7.3"} {
		if id, err := audit.DecodeCursor(c); err == nil {
			t.Errorf("DecodeCursor(%q) = %d, nil; want an error", c, id)
		} else if c != "a1n.7.3" && err.Error() != "cursor: malformed" {
			t.Errorf("DecodeCursor(%q) error %q, want cursor: malformed", c, err)
		}
		if _, ok := audit.CursorPrunedBy(c); ok {
			t.Errorf("CursorPrunedBy(%q) ok; want none", c)
		}
		if err := (audit.Query{Cursor: c}).Validate(); err == nil {
			t.Errorf("a query from cursor %q is valid; want it refused", c)
		}
	}
	// A list cursor is not an audit cursor, and the other way round.
	if _, err := backendkit.DecodeListCursor(audit.EncodeCursor(3)); err == nil {
		t.Error("an audit cursor decoded as a list cursor")
	}
	if _, err := audit.DecodeCursor(backendkit.EncodeListCursor("3")); err == nil {
		t.Error("a list cursor decoded as an audit cursor")
	}
}

func TestRecordFormatVersion(t *testing.T) {
	if audit.RecordFormatVersion != 1 {
		t.Errorf("RecordFormatVersion = %d: a change needs a migration and a reader for the old version", audit.RecordFormatVersion)
	}
}

func TestQueryOpsOwnerAndNewest(t *testing.T) {
	for _, q := range []audit.Query{
		{Ops: audit.RecordedOps},
		{Ops: []protocol.Op{protocol.OpRevoke}, Owner: "w1", Newest: true},
		{Newest: true, Cursor: audit.EncodeNewestCursor(9)},
		{Follow: true, Cursor: audit.EncodeCursor(9)},
	} {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", q, err)
		}
	}
	for _, tc := range []struct {
		q    audit.Query
		want string
	}{
		{audit.Query{Ops: []protocol.Op{"expire"}}, `op: "expire" is not an operation the audit trail records (acquire,renew,release,revoke,prune)`},
		{audit.Query{Ops: []protocol.Op{"get"}}, `op: "get" is not an operation`},
		{audit.Query{Ops: []protocol.Op{"renew", "renew"}}, `op: "renew" is given twice`},
		{audit.Query{Owner: "w\x00"}, "owner: control character"},
		{audit.Query{Newest: true, Follow: true}, "newest first cannot be followed"},
		{audit.Query{Newest: true, Cursor: audit.EncodeCursor(3)}, "cursor: from an oldest-first page; read it oldest first"},
		{audit.Query{Cursor: audit.EncodeNewestCursor(3)}, "cursor: from a newest-first page; read it newest first"},
		{audit.Query{Newest: true, Cursor: "a1n.x"}, "cursor: malformed"},
		{audit.Query{Newest: true, Cursor: "bogus"}, "cursor: not an audit cursor"},
	} {
		err := tc.q.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
	for _, tc := range []struct {
		q             audit.Query
		after, before int64
	}{
		{audit.Query{}, 0, math.MaxInt64},
		{audit.Query{Cursor: audit.EncodeCursor(7)}, 7, math.MaxInt64},
		{audit.Query{Newest: true}, 0, math.MaxInt64},
		{audit.Query{Newest: true, Cursor: audit.EncodeNewestCursor(7)}, 0, 7},
	} {
		if a, b, err := tc.q.IDRange(); err != nil || a != tc.after || b != tc.before {
			t.Errorf("%+v.IDRange() = %d, %d, %v; want %d, %d", tc.q, a, b, err, tc.after, tc.before)
		}
	}
	if got := (audit.Query{Newest: true}).NextCursor(5); got != "a1n.5" {
		t.Errorf("newest NextCursor(5) = %q, want a1n.5", got)
	}
	if _, err := audit.DecodeCursor(audit.EncodeNewestCursor(5)); err == nil {
		t.Error("DecodeCursor of a newest-first cursor: no error")
	}
	if got := audit.ParseOps(" acquire, renew ,"); len(got) != 3 || got[0] != "acquire" || got[1] != "renew" || got[2] != "" {
		t.Errorf("ParseOps = %q", got)
	}
	if got := audit.ParseOps(""); got != nil {
		t.Errorf("ParseOps(\"\") = %q, want nil", got)
	}
	rec := audit.Record{Op: protocol.OpRenew, Namespace: "ns", Key: "k", Owner: "w1", At: time.Unix(10, 0)}
	for _, tc := range []struct {
		q    audit.Query
		want bool
	}{
		{audit.Query{}, true},
		{audit.Query{Ops: []protocol.Op{protocol.OpAcquire, protocol.OpRenew}, Owner: "w1", Namespace: "ns", Key: "k"}, true},
		{audit.Query{Ops: []protocol.Op{protocol.OpAcquire}}, false},
		{audit.Query{Owner: "w"}, false},
		{audit.Query{Since: time.Unix(11, 0)}, false},
		{audit.Query{Namespace: "other"}, false},
	} {
		if got := tc.q.Matches(rec); got != tc.want {
			t.Errorf("%+v.Matches = %t, want %t", tc.q, got, tc.want)
		}
	}
}
