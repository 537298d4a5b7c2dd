package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// rev64: watch --since replays leases that were released long ago. While it
// catches up, the expiry timer (due at an expires_at already past) races the
// records still queued: when it wins, watch asks the store about a lease
// whose release it has not printed yet, hears not_found, and prints an
// expire event for a lease that was released, never expired; the renew
// that follows re-tracks the lease, so one lease can expire several times.
func TestRev64WatchSinceInventsExpiriesOfReleasedLeases(t *testing.T) {
	e := sqliteEnv(t)
	const cycles = 25
	for range cycles {
		o := runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", "200ms", "-o", "token")
		wantCode(t, o, 0)
		tok := strings.TrimSpace(o.stdout)
		wantCode(t, runCLI(t, e, "renew", "k", "-n", "w", "--owner", "o", "--token", tok, "--ttl", "200ms"), 0)
		wantCode(t, runCLI(t, e, "release", "k", "-n", "w", "--owner", "o", "--token", tok), 0)
	}
	time.Sleep(300 * time.Millisecond) // every expires_at is past

	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"watch", "-n", "w", "--since", "1h", "-o", "json", "--interval", "20ms"}, nil, &out, &errs, e.get)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), `"op":"release"`) < cycles && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	var expires []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if rec["op"] == "expire" {
			expires = append(expires, line)
		}
	}
	if len(expires) > 0 {
		t.Fatalf("watch --since printed %d expire events for %d leases that were all released before expiring (first: %s)",
			len(expires), cycles, expires[0])
	}
}

// rev64: watch --since T (or --cursor) tracks only the leases whose
// acquire or renew it reads after T: a lease taken before T and never
// renewed runs out while watch runs, and watch prints no expire event,
// where watch from now (which seeds the live leases) prints one.
func TestRev64WatchSinceMissesExpiryOfALeaseTakenBefore(t *testing.T) {
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", "2s"), 0)
	time.Sleep(100 * time.Millisecond)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(100 * time.Millisecond)
	wantCode(t, runCLI(t, e, "acquire", "other", "-n", "w", "--owner", "o", "--ttl", "1h"), 0)

	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"watch", "-n", "w", "--since", since, "-o", "json", "--interval", "20ms"}, nil, &out, &errs, e.get)
	}()
	deadline := time.Now().Add(6 * time.Second)
	for !strings.Contains(out.String(), `"op":"expire"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(out.String(), `"op":"acquire"`) {
		t.Fatalf("watch printed no acquire of other:\n%s\n%s", out.String(), errs.String())
	}
	if !strings.Contains(out.String(), `"op":"expire"`) {
		t.Fatalf("watch -n w --since %s ran 4s past the 2s lease w/k's expiry and printed no expire event:\n%s", since, out.String())
	}
}
