package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// demo --ttl 1m tells its TTL as the flag takes it, 1m, not Go's 1m0s
// (contract v3: one duration grammar). The demo is stopped once it has
// printed its first line, which names the TTL.
func TestReviewDemoTellsItsTTLInTheGrammar(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, []string{"demo", "--ttl", "1m"}, nil, &stdout, &stderr, env{}.get) }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stdout.String(), "lease ttl") {
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before its first line\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("demo: no first line within 30s\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if !strings.HasSuffix(first, "lease ttl 1m") {
		t.Errorf("demo --ttl 1m: first line %q, want it to end in \"lease ttl 1m\"", first)
	}
}
