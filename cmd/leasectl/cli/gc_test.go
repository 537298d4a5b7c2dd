package cli

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// gc removes the rows of ended leases past the grace, keeps live ones and
// younger ones, and refuses bad flags without opening the store. The keys
// are in a namespace of the test's own: on PostgreSQL gc leaves a row
// whose key's lock (the database's, shared by every schema) is held, so
// another test's default/short or default/done would make it miscount.
func TestGC(t *testing.T) {
	for name, e := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e(t)
			ns := pgtest.Namespace()
			wantCode(t, runCLI(t, e, "acquire", "short", "-n", ns, "--owner", "w", "--ttl", "1ms"), 0)
			acq := runCLI(t, e, "acquire", "done", "-n", ns, "--owner", "w", "-o", "json")
			wantCode(t, acq, 0)
			wantCode(t, runCLI(t, e, "release", "done", "-n", ns, "--owner", "w", "--token", itoa(token(t, acq.json(t)))), 0)
			wantCode(t, runCLI(t, e, "acquire", "live", "-n", ns, "--owner", "w", "--ttl", "1h"), 0)
			time.Sleep(20 * time.Millisecond)

			wantCode(t, runCLI(t, e, "gc", "--grace", "-1s"), 2)
			wantCode(t, runCLI(t, e, "gc", "--batch", "0"), 2)
			kept := runCLI(t, e, "gc", "-o", "json") // default grace: an hour
			wantCode(t, kept, 0)
			if m := kept.json(t); m["removed"] != float64(0) {
				t.Fatalf("gc with the default grace: %v, want nothing removed", m)
			}
			gc := runCLI(t, e, "gc", "--grace", "0s", "--batch", "1", "-o", "json")
			wantCode(t, gc, 0)
			// SQLite deletes a released row at once; PostgreSQL keeps it
			// as a tombstone until a sweep.
			want := map[string]float64{"sqlite": 1, "postgres": 2}[name]
			if m := gc.json(t); m["removed"] != want {
				t.Fatalf("gc --grace 0s: %v, want %v removed", m, want)
			}
			// A bare 0 is a grace gc's help gives a meaning: nothing left to remove.
			zero := runCLI(t, e, "gc", "--grace", "0", "-o", "json")
			wantCode(t, zero, 0)
			if m := zero.json(t); m["removed"] != float64(0) {
				t.Fatalf("gc --grace 0 after gc --grace 0s: %v, want nothing left", m)
			}
			list := runCLI(t, e, "list", "-n", ns, "--include-expired", "-o", "json")
			wantCode(t, list, 0)
			if leases := list.json(t)["leases"].([]any); len(leases) != 1 {
				t.Fatalf("rows after gc: %v, want only the live lease", leases)
			}
			again := runCLI(t, e, "acquire", "short", "-n", ns, "--owner", "x", "-o", "json")
			wantCode(t, again, 0)
		})
	}
}
