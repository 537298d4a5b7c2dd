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
