package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// audit --follow without --since or --cursor prints what happens from now
// on, not the history; --since brings the history back.
func TestAuditFollowStartsAtTheEnd(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, k := range []string{"old-1", "old-2", "old-3"} {
		wantCode(t, runCLI(t, e, "acquire", k, "--owner", "w1"), 0)
	}
	follow := func(args ...string) (stdout *syncbuf.Buffer, stop func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errs syncbuf.Buffer
		done := make(chan int)
		go func() {
			done <- Execute(ctx, append([]string{"audit", "--follow", "--interval", "20ms"}, args...), nil, &out, &errs, e.get)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(errs.String(), "following") {
			if time.Now().After(deadline) {
				t.Fatalf("audit --follow %v never said it was following; stderr:\n%s", args, errs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return &out, func() int { cancel(); return <-done }
	}

	out, stop := follow()
	wantCode(t, runCLI(t, e, "acquire", "new", "--owner", "w2"), 0)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "default/new") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if code := stop(); code != 0 {
		t.Fatalf("follow exit %d", code)
	}
	if s := out.String(); !strings.Contains(s, "default/new") || strings.Contains(s, "old-") {
		t.Fatalf("audit --follow printed:\n%s\nwant the new record only", s)
	}

	out, stop = follow("--since", "1h")
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "default/new") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	for _, k := range []string{"old-1", "old-2", "old-3", "new"} {
		if !strings.Contains(out.String(), "default/"+k) {
			t.Errorf("audit --follow --since 1h lacks %s:\n%s", k, out.String())
		}
	}
}

// audit --follow and watch from a cursor behind a prune failed to say so:
// the follower printed what was left after the gap. They exit 5
// (unavailable, as an etcd follower whose revision was compacted) with a
// message naming the prune and --since; from the start they follow.
func TestFollowFromACursorBehindAPruneFails(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, k := range []string{"k1", "k2", "k3"} {
		// Leases of a millisecond, ended by the prune: it keeps a live
		// lease's acquire.
		wantCode(t, runCLI(t, e, "acquire", k, "--owner", "w1", "--ttl", "1ms"), 0)
	}
	time.Sleep(2 * time.Millisecond) // the cut-off after the records, not after the store's time
	wantCode(t, runCLI(t, e, "audit", "prune", "--before", "0s", "--yes"), 0)
	for _, args := range [][]string{
		{"audit", "--follow", "--cursor", "a1.1"},
		{"audit", "--follow", "--cursor", "a1.1", "-o", "json"},
		{"watch", "--cursor", "a1.1"},
	} {
		o := runCLI(t, e, args...)
		said := o.stderr + o.stdout // -o json: the failure's object on stdout
		if o.code != 5 || !strings.Contains(said, "behind a prune") || !strings.Contains(said, "--since") ||
			strings.Contains(o.stdout, `"k3"`) || strings.Contains(o.stdout, "default/k3") {
			t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s\nwant exit 5 naming the prune and --since, nothing printed",
				args, o.code, o.stdout, o.stderr)
		}
	}
}
