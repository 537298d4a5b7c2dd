package cli

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/protocol"
)

// watching is a watch run in-process in the background; stop ends it
// (as Ctrl-C does) and returns its stdout.
type watching struct {
	out, errs syncbuf.Buffer
	cancel    context.CancelFunc
	done      chan int
}

func startWatch(e env, args ...string) *watching {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watching{cancel: cancel, done: make(chan int, 1)}
	go func() { w.done <- Execute(ctx, append([]string{"watch"}, args...), nil, &w.out, &w.errs, e.get) }()
	return w
}

// waitFor waits up to d until stdout (or stderr, for errs) holds s.
func (w *watching) waitFor(t *testing.T, errs bool, s string, d time.Duration) bool {
	t.Helper()
	buf := &w.out
	if errs {
		buf = &w.errs
	}
	for deadline := time.Now().Add(d); !strings.Contains(buf.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

func (w *watching) stop(t *testing.T) string {
	t.Helper()
	w.cancel()
	if code := <-w.done; code != 0 {
		t.Fatalf("watch exited %d, want 0\n%s\n%s", code, w.out.String(), w.errs.String())
	}
	return w.out.String()
}

// expireEvents returns the expire events among watch -o json's lines.
func expireEvents(t *testing.T, out string) []string {
	t.Helper()
	var expires []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if rec["op"] == "expire" {
			expires = append(expires, line)
		}
	}
	return expires
}

// watch --since replays leases that were released long ago, every
// expires_at already past. While it catches up, no lease is reported
// expired: when a lease's expires_at has passed and the store no longer
// holds it, the release still to be read ended it, not expiry (a watch
// that asked the store while records were queued printed an expire event
// for released leases, and again when a later renew of the same lease
// tracked it once more).
func TestWatchSinceReportsNoExpiryOfReleasedLeases(t *testing.T) {
	for name, newEnv := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			const cycles = 25
			// TTLs long enough for each cycle on a loaded machine; then
			// the watch starts once every expires_at is past.
			const ttl = 2 * time.Second
			var ended time.Time
			for range cycles {
				o := runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", ttl.String(), "-o", "token")
				wantCode(t, o, 0)
				tok := strings.TrimSpace(o.stdout)
				wantCode(t, runCLI(t, e, "renew", "k", "-n", "w", "--owner", "o", "--token", tok, "--ttl", ttl.String()), 0)
				ended = time.Now().Add(ttl) // after the renew answered: at or after its expires_at
				wantCode(t, runCLI(t, e, "release", "k", "-n", "w", "--owner", "o", "--token", tok), 0)
			}
			time.Sleep(time.Until(ended) + 100*time.Millisecond) // every expires_at is past

			w := startWatch(e, "-n", "w", "--since", "1h", "-o", "json", "--interval", "20ms")
			deadline := time.Now().Add(20 * time.Second)
			for strings.Count(w.out.String(), `"op":"release"`) < cycles && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			out := w.stop(t)
			if n := strings.Count(out, `"op":"release"`); n != cycles {
				t.Fatalf("watch --since printed %d releases, want %d:\n%s", n, cycles, out)
			}
			if expires := expireEvents(t, out); len(expires) > 0 {
				t.Fatalf("watch --since printed %d expire events for %d leases that were all released before expiring (first: %s)",
					len(expires), cycles, expires[0])
			}
		})
	}
}

// watch --since T (and --cursor) reports the expiry of a lease taken
// before T that runs out while it watches, as watch from now does: it
// tracks the leases live when it starts, not only those whose acquire or
// renew it reads after T.
func TestWatchSinceReportsTheExpiryOfALeaseTakenBefore(t *testing.T) {
	for name, newEnv := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			o := runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", "2s", "-o", "json")
			wantCode(t, o, 0)
			token := lease(t, o.json(t))["token"]
			time.Sleep(100 * time.Millisecond)
			since := time.Now().UTC().Format(time.RFC3339Nano)
			time.Sleep(100 * time.Millisecond)
			wantCode(t, runCLI(t, e, "acquire", "other", "-n", "w", "--owner", "o", "--ttl", "1h"), 0)

			w := startWatch(e, "-n", "w", "--since", since, "-o", "json", "--interval", "20ms")
			w.waitFor(t, false, `"op":"expire"`, 6*time.Second)
			time.Sleep(200 * time.Millisecond) // anything else it would print
			out := w.stop(t)
			if !strings.Contains(out, `"op":"acquire"`) {
				t.Fatalf("watch printed no acquire of other:\n%s\n%s", out, w.errs.String())
			}
			expires := expireEvents(t, out)
			if len(expires) == 0 {
				t.Fatalf("watch -n w --since %s ran 4s past the 2s lease w/k's expiry and printed no expire event:\n%s", since, out)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(expires[0]), &ev); err != nil || len(expires) != 1 || ev["key"] != "k" || ev["token"] != token {
				t.Fatalf("watch --since printed expire events %v, want one, of k's lease (token %v)", expires, token)
			}
		})
	}
}

// A watch from now reports no expiry of a lease whose release committed
// before its expires_at but is held back from followers (PostgreSQL: a
// transaction in progress in the cluster) when the expires_at passes: the
// store no longer holds the lease, but the trail holds its release.
func TestWatchReportsNoExpiryOfAReleaseHeldBack(t *testing.T) {
	e := migratedPostgresEnv(t)
	w := startWatch(e, "-n", "w", "-o", "json", "--interval", "20ms")
	if !w.waitFor(t, true, "following", 10*time.Second) {
		t.Fatalf("watch did not start:\n%s", w.errs.String())
	}
	// The release must come before the lease's expiry: its own leasectl
	// process, opening the store, takes a while on a loaded machine (500ms
	// was too short under CI's load).
	const ttl = 3 * time.Second
	acquired := time.Now()
	o := runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", ttl.String(), "-o", "token")
	wantCode(t, o, 0)
	tok := strings.TrimSpace(o.stdout)
	if !w.waitFor(t, false, `"op":"acquire"`, 10*time.Second) {
		t.Fatalf("watch printed no acquire:\n%s", w.out.String())
	}

	// A transaction with an id, left open: followers read only below it.
	conn, err := pgx.Connect(t.Context(), e[EnvDSN])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, runCLI(t, e, "release", "k", "-n", "w", "--owner", "o", "--token", tok), 0)
	time.Sleep(time.Until(acquired.Add(ttl + time.Second))) // the lease's expires_at, and the watch's margin, pass
	heldBack := !strings.Contains(w.out.String(), `"op":"release"`)
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, false, `"op":"release"`, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	out := w.stop(t)
	if !heldBack {
		t.Fatalf("the release was not held back by the open transaction:\n%s", out)
	}
	if !strings.Contains(out, `"op":"release"`) {
		t.Fatalf("watch printed no release once the transaction ended:\n%s", out)
	}
	if expires := expireEvents(t, out); len(expires) > 0 {
		t.Fatalf("watch printed an expire event for a lease released before its expiry, its release held back: %s\n%s", expires[0], out)
	}
}

func TestParseWatchOps(t *testing.T) {
	for _, c := range []struct {
		ops        []string
		noRenewals bool
		want       []protocol.Op // nil: every op
		bad        string        // a word the refusal names
	}{
		{nil, false, nil, ""},
		{nil, true, []protocol.Op{protocol.OpAcquire, protocol.OpRelease, protocol.OpRevoke, OpExpire}, ""},
		{[]string{"acquire,expire"}, false, []protocol.Op{protocol.OpAcquire, OpExpire}, ""},
		{[]string{"acquire", "revoke"}, true, []protocol.Op{protocol.OpAcquire, protocol.OpRevoke}, ""},
		{[]string{"renew"}, false, []protocol.Op{protocol.OpRenew}, ""},
		{[]string{"renew"}, true, nil, "--no-renewals"},
		{[]string{"acquire,renew"}, true, nil, "--op renew"},
		{[]string{"bogus"}, false, nil, "bogus"},
	} {
		show, err := parseWatchOps(c.ops, c.noRenewals)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("--op %v --no-renewals=%v: %v, %v; want a usage error naming %s", c.ops, c.noRenewals, show, err, c.bad)
			}
			continue
		}
		var got []protocol.Op
		for _, op := range watchOps {
			if show[op] {
				got = append(got, op)
			}
		}
		if err != nil || (show == nil) != (c.want == nil) || !slices.Equal(got, c.want) {
			t.Errorf("--op %v --no-renewals=%v: %v, %v; want %v", c.ops, c.noRenewals, show, err, c.want)
		}
	}
}
