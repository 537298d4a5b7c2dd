package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
)

// The demo's first step tells the race in an order a reader can follow: a
// worker's conflict with a holder comes after that holder's acquire, and
// "found every shard held" after the three acquires. The workers printed
// each line when their own call returned, so a conflict with worker-4
// could come before "worker-4 acquired shard-a" (about every other run).
// The race itself is the same in every run, so several runs show it;
// each is interrupted once step 2 begins.
func TestDemoRaceIsToldInOrder(t *testing.T) {
	t.Parallel()
	acquired := regexp.MustCompile(`^\s*(worker-\d) acquired (shard-\w) with token (\d+)$`)
	conflict := regexp.MustCompile(`^\s*worker-\d wanted (shard-\w): conflict, (worker-\d) holds it with token (\d+)$`)
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr syncbuf.Buffer
			done := make(chan int, 1)
			go func() { done <- Execute(ctx, []string{"demo", "--ttl", "3s"}, nil, &stdout, &stderr, env{}.get) }()
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(stdout.String(), "\n2. ") {
				if time.Now().After(deadline) {
					t.Fatalf("no step 2 within 30s\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			var step1 []string
			for _, s := range strings.Split(stdout.String(), "\n") {
				if strings.HasPrefix(s, "2. ") {
					break
				}
				step1 = append(step1, s)
			}
			told := map[string]bool{} // "holder shard token" of the acquires told so far
			for _, s := range step1 {
				if m := acquired.FindStringSubmatch(s); m != nil {
					told[m[1]+" "+m[2]+" "+m[3]] = true
				}
				if m := conflict.FindStringSubmatch(s); m != nil && !told[m[2]+" "+m[1]+" "+m[3]] {
					t.Fatalf("step 1 tells %q before %s's acquire of %s:\n%s", strings.TrimSpace(s), m[2], m[1], strings.Join(step1, "\n"))
				}
				if strings.Contains(s, "found every shard held") && len(told) != 3 {
					t.Fatalf("step 1 tells %q before the three acquires:\n%s", strings.TrimSpace(s), strings.Join(step1, "\n"))
				}
			}
		})
	}
}
