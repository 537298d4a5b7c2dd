package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowLogsRetryingOnlyWhenItRetries: audit --follow and watch over
// an http DSN log a failure the follow goes on after as "read failed;
// retrying", and report a failure it ends on as final, with its exit
// code, never as retrying. The served store is real; its follow route
// answers 503 once (the follow retries), then streams an event that ends
// the follow: a record event the client cannot read (exit 5, unavailable)
// or an end event refusing the token (exit 7). Both logged the final one
// as "read failed; retrying" too.
func TestFollowLogsRetryingOnlyWhenItRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, event, data string
		code              int
		says              string // what the final error names
	}{
		{"malformed record", "record", `{"id":`, 5, "record event"},
		{"token refused", "end", `{"status":"forbidden","message":"the token may no longer read scan"}`, 7, "may no longer read scan"},
	} {
		for _, args := range [][]string{{"audit", "--follow", "-n", "scan"}, {"watch", "-n", "scan"}} {
			t.Run(tc.name+"/"+args[0], func(t *testing.T) {
				t.Parallel()
				b := memstore.New(nil)
				rt := protocol.New(b, nil)
				t.Cleanup(func() { _ = rt.Close(context.Background()) })
				h, err := httpapi.NewHandler(rt, b, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				var follows atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/v1/audit/follow" {
						h.ServeHTTP(w, r)
						return
					}
					if follows.Add(1) == 1 {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusServiceUnavailable)
						fmt.Fprint(w, `{"status":"unavailable","message":"the follow listener is down"}`)
						return
					}
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprint(w, "event: subscribed\n"+`data: {"status":"subscribed","message":"following","keep_alive":"15s"}`+"\n\n")
					fmt.Fprintf(w, "event: %s\ndata: %s\n\n", tc.event, tc.data)
					http.NewResponseController(w).Flush()
					<-r.Context().Done()
				}))
				defer srv.Close()
				o := runCLI(t, env{EnvDSN: srv.URL}, args...)
				if o.code != tc.code {
					t.Fatalf("%v: exit %d, want %d\nstderr: %s", args, o.code, tc.code, o.stderr)
				}
				if !strings.Contains(o.stderr, tc.says) {
					t.Errorf("%v: stderr does not name %q:\n%s", args, tc.says, o.stderr)
				}
				var retrying []string
				for _, line := range strings.Split(o.stderr, "\n") {
					if strings.Contains(line, "retrying") {
						retrying = append(retrying, line)
					}
				}
				if len(retrying) != 1 || !strings.Contains(retrying[0], "the follow listener is down") {
					t.Fatalf("%v: stderr says retrying on %d lines, want one, of the 503 the follow retried (follow requests: %d):\n%s",
						args, len(retrying), follows.Load(), o.stderr)
				}
				if n := follows.Load(); n != 2 {
					t.Errorf("%v: %d follow requests, want 2", args, n)
				}
			})
		}
	}
}
