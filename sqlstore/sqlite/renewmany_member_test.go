package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// One renewal of a RenewMany that the database refuses (here a unique
// index a DBA put on the trail, which that lease's renewal record breaks)
// fails alone, as protocol.BulkRenewer pins ("one lease's refusal never
// fails the others"), as a refused write in a coalesced batch fails alone
// (its savepoint) and as the PostgreSQL backend's RenewMany answers it:
// the other leases are renewed, each with its record, and the refused one
// answers unavailable with neither its change nor a record.
func TestRenewManyOneRefusedRenewalFailsAlone(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	b := open(t, path, nil)
	// From another handle: at most one record of lease k7 in the trail,
	// its acquire's.
	if _, err := rawDB(t, path).Exec(`CREATE UNIQUE INDEX dba_k7_once ON leasestore_audit (namespace, name) WHERE name = 'k7'`); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	const n = 20
	reqs := make([]protocol.RenewRequest, n)
	acquired := make([]protocol.Result, n)
	for i := range n {
		k := key(fmt.Sprintf("k%d", i))
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: fmt.Sprintf("a%d", i)})
		if err != nil || res.Status != protocol.StatusAcquired {
			t.Fatalf("acquire %s: %+v %v", k.Name, res, err)
		}
		acquired[i] = res
		reqs[i] = protocol.RenewRequest{Key: k, Owner: "o", Token: res.Lease.Token, TTL: time.Hour, RequestID: fmt.Sprintf("r%d", i)}
	}
	got, err := b.RenewMany(ctx, reqs)
	if err != nil {
		t.Fatalf("RenewMany of %d leases, one of whose records the database refuses: %v; want one result per "+
			"lease, the refused one unavailable and the others renewed", n, err)
	}
	for i, res := range got {
		switch {
		case i == 7 && res.Status != protocol.StatusUnavailable:
			t.Errorf("k7 (its record refused): %+v, want unavailable", res)
		case i != 7 && res.Status != protocol.StatusRenewed:
			t.Errorf("k%d: %+v, want renewed", i, res)
		}
	}
	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	renewed := 0
	for _, r := range page.Records {
		if r.Op == protocol.OpRenew {
			renewed++
		}
	}
	if renewed != n-1 {
		t.Errorf("%d renew records in the trail, want %d", renewed, n-1)
	}
}
