package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestFollowEndsAtAMalformedEvent: a server whose follow stream sends a
// record or position event the client cannot read (data that is not
// JSON, a cursor that does not parse, a record of an unknown format
// version) speaks another protocol: reconnecting reads the same event
// again. The client's Follow yields one error that names the event and
// what was malformed, and ends; it does not reconnect.
func TestFollowEndsAtAMalformedEvent(t *testing.T) {
	t.Parallel()
	const good = `{"id":7,"at":"2030-01-02T03:04:05.000000Z","op":"acquire","namespace":"scan","key":"k","owner":"w",` +
		`"token":1,"request_id":"r","actor":"","reason":"","status":"acquired","version":1}`
	for _, tc := range []struct {
		name, event, data string
		says              []string // what the error names
	}{
		{"position not JSON", "position", `{"cursor":`, []string{"position event", `{\"cursor\":`}},
		{"position cursor", "position", `{"cursor":"b7.x"}`, []string{"position event", `cursor "b7.x"`}},
		{"record not JSON", "record", `{"id":`, []string{"record event", `{\"id\":`}},
		{"record version", "record", strings.Replace(good, `"version":1`, `"version":99`, 1),
			[]string{"record event", "format version 99"}},
		{"record without a field", "record", strings.Replace(good, `"actor":"",`, "", 1), []string{"record event", `"actor"`}},
		{"record without token", "record", strings.Replace(good, `"token":1,`, "", 1), []string{"record event", `"token"`}},
		{"subscribed not JSON", "subscribed", `{"status":`, []string{"subscribed event", `{\"status\":`}},
		{"subscribed keep_alive", "subscribed", `{"status":"subscribed","message":"following","keep_alive":"soon"}`,
			[]string{"subscribed event", `keep_alive "soon"`}},
		{"subscribed without keep_alive", "subscribed", `{"status":"subscribed","message":"following"}`,
			[]string{"subscribed event", `keep_alive ""`}},
		{"subscribed without status", "subscribed", `{"message":"following","keep_alive":"15s"}`,
			[]string{"subscribed event", `status ""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var follows atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/audit/follow" {
					http.Error(w, "not this server's route", http.StatusTeapot)
					return
				}
				follows.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				if tc.event != "subscribed" { // else the stream's first event is the malformed one
					fmt.Fprint(w, "event: subscribed\n"+`data: {"status":"subscribed","message":"following","keep_alive":"15s"}`+"\n\n")
				}
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", tc.event, tc.data)
				http.NewResponseController(w).Flush()
				<-r.Context().Done()
			}))
			defer srv.Close()
			c, err := httpapi.NewClient(srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			// From a1.0 (an unpruned trail's start): straight to the
			// stream, which is all this server serves.
			next, stop := iterPull(c.Follow(ctx, audit.Query{Namespace: "scan", Cursor: audit.EncodeCursor(0)}))
			defer stop()
			type pulled struct {
				rec audit.Record
				err error
				ok  bool
			}
			pull := func() pulled {
				ch := make(chan pulled, 1)
				go func() {
					rec, err, ok := next()
					ch <- pulled{rec, err, ok}
				}()
				select {
				case p := <-ch:
					return p
				case <-time.After(10 * time.Second):
					cancel() // the pull above ends with ctx
					<-ch
					t.Fatalf("the follow neither yielded nor ended within 10s of the %s event %s (follow requests: %d)",
						tc.event, tc.data, follows.Load())
				}
				return pulled{}
			}
			first := pull()
			if !first.ok || first.err == nil {
				t.Fatalf("the follow yielded %+v, %v (more: %v), want the error of the malformed %s event", first.rec, first.err, first.ok, tc.event)
			}
			for _, s := range tc.says {
				if !strings.Contains(first.err.Error(), s) {
					t.Errorf("error %q does not name %q", first.err, s)
				}
			}
			if s := protocol.StatusOf(first.err); s != protocol.StatusUnavailable {
				t.Errorf("error status %s, want unavailable", s)
			}
			if then := pull(); then.ok {
				t.Fatalf("after the malformed %s event the follow went on: %+v, %v (follow requests: %d), want it ended",
					tc.event, then.rec, then.err, follows.Load())
			}
			if n := follows.Load(); n != 1 {
				t.Fatalf("%d follow requests, want 1: the client reconnected after a malformed %s event", n, tc.event)
			}
		})
	}
}
