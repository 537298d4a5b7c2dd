package postgres_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// One sweep removes up to max rows that ended more than the grace ago and
// sets aside up to max other ended rows, however the two kinds mix in the
// table, and leaves live leases alone; a sweep with nothing left to do
// answers zeros. The keys are in a namespace of the test's own: a sweep
// leaves a row whose key's lock is held, and other tests' ns/k0 ... ns/k9
// (in other schemas, same locks) made it count 1 removed where 3 were due.
func TestSweepStepsTakeBothKindsUpToMax(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	key := keysIn(pgtest.Namespace())
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	for i := range 10 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "w",
			TTL: time.Hour, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	// Even keys ended two hours ago, odd ones a minute ago; k9 stays live.
	mustExec(t, raw, `UPDATE leasestore_leases
		SET expires_at = now() - CASE WHEN right(name, 1)::int % 2 = 0 THEN interval '2 hours' ELSE interval '1 minute' END
		WHERE name <> 'k9'`)
	rows := func(q string) int { return count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE "+q) }
	for i, want := range []protocol.SweepResult{{Removed: 3, SetAside: 3}, {Removed: 2, SetAside: 1}, {}} {
		got, err := b.Sweep(ctxT(t), 3, time.Hour)
		if err != nil || got != want {
			t.Fatalf("sweep %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
	if n := rows("true"); n != 5 {
		t.Fatalf("%d rows left, want 5 (4 set aside, 1 live)", n)
	}
	if n := rows("swept_token = token"); n != 4 {
		t.Fatalf("%d rows set aside, want 4", n)
	}
	if res, err := b.Get(ctxT(t), protocol.GetRequest{Key: key("k9")}); err != nil || res.Status != protocol.StatusFound {
		t.Fatalf("the live lease: %+v %v", res, err)
	}
}

// A sweep's max is a count, and any count is valid: one beyond what an SQL
// integer holds (`leasectl gc --batch 3000000000`) removes what there is,
// as does math.MaxInt; it answered unavailable ("integer out of range",
// "unable to encode ... into binary format for int4"), which leasectl
// reports as an outage (exit 5). A max of zero or less removes nothing.
func TestSweepTakesAnyMax(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	key := keysIn(pgtest.Namespace())
	b := openBackend(t, dsn, nil)
	n := 0
	// Two leases that end at once, then a live one (the greatest token).
	leases := func() {
		for _, ttl := range []time.Duration{time.Millisecond, time.Millisecond, time.Hour} {
			n++
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", n)), Owner: "w",
				TTL: ttl, RequestID: fmt.Sprintf("a%d", n)})
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		}
		time.Sleep(5 * time.Millisecond)
	}
	leases()
	for _, max := range []int{0, -1} {
		if got, err := b.Sweep(ctxT(t), max, 0); err != nil || got != (protocol.SweepResult{}) {
			t.Fatalf("sweep with max %d: %+v, %v; want nothing done", max, got, err)
		}
	}
	// 3e9 passes int32 where int is 64 bits (and is math.MaxInt where it is 32).
	for i, max := range []int{1 << 30, int(min(int64(3_000_000_000), math.MaxInt)), math.MaxInt} {
		if i > 0 {
			leases()
		}
		if got, err := b.Sweep(ctxT(t), max, 0); err != nil || got.Removed != 2 {
			t.Fatalf("sweep with max %d: %+v, %v; want the two ended rows removed", max, got, err)
		}
	}
}
