package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// malformedSubscribed are subscribed events a client cannot read: data
// that is not the event's JSON, or that lacks or garbles a field. Each
// names what its error must say besides "subscribed event".
var malformedSubscribed = []struct {
	name, data, says string
}{
	{"not JSON", `{"status":`, `{\"status\":`},
	{"keep_alive not a string", `{"status":"subscribed","message":"m","keep_alive":15}`, "keep_alive"},
	{"no keep_alive", `{"status":"subscribed","message":"m"}`, `keep_alive ""`},
	{"keep_alive no duration", `{"status":"subscribed","message":"m","keep_alive":"soon"}`, `keep_alive "soon"`},
	{"no status", `{"message":"m","keep_alive":"15s"}`, `status ""`},
}

// TestSubscribeEndsAtAMalformedSubscribedEvent: a notification stream
// whose subscribed event the client cannot read comes from a server of
// another protocol, which sends it again on every reconnection. Subscribe
// fails at once with an error naming the event (not "could not be
// reached"), after one request; a subscription whose stream broke and
// whose reconnection met such an event ends (it reconnected for ever,
// pausing at most 5s).
func TestSubscribeEndsAtAMalformedSubscribedEvent(t *testing.T) {
	t.Parallel()
	k := protocol.Key{Namespace: "ns", Name: "k"}
	for _, tc := range malformedSubscribed {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// goodFirst: the first request gets a good subscribed event and
			// an end event (the server went away), the later ones tc's.
			var goodFirst atomic.Bool
			var requests atomic.Int32
			second := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := requests.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 1 && goodFirst.Load() {
					fmt.Fprint(w, "event: subscribed\n"+`data: {"status":"subscribed","message":"m","keep_alive":"15s"}`+"\n\n"+
						"event: end\n"+`data: {"status":"unavailable","message":"the server is shutting down"}`+"\n\n")
					return
				}
				if n == 2 {
					second <- struct{}{}
				}
				fmt.Fprintf(w, "event: subscribed\ndata: %s\n\n", tc.data)
				http.NewResponseController(w).Flush()
				<-r.Context().Done()
			}))
			defer srv.Close()
			c := newClient(t, srv.URL, nil)

			type subscribed struct {
				cancel func()
				err    error
			}
			subscribe := func() subscribed {
				got := make(chan subscribed, 1)
				go func() {
					_, cancel, err := c.Subscribe(t.Context(), k)
					got <- subscribed{cancel, err}
				}()
				select {
				case s := <-got:
					return s
				case <-time.After(10 * time.Second):
					t.Fatalf("Subscribe did not return within 10s of the subscribed event %s (requests: %d)", tc.data, requests.Load())
				}
				return subscribed{}
			}

			s := subscribe()
			if s.err == nil {
				s.cancel()
				t.Fatalf("Subscribe succeeded on the subscribed event %s, want its error", tc.data)
			}
			for _, want := range []string{"subscribed event", tc.says} {
				if !strings.Contains(s.err.Error(), want) {
					t.Errorf("error %q does not name %q", s.err, want)
				}
			}
			if !errors.Is(s.err, protocol.ErrUnavailable) {
				t.Errorf("error %v, want status unavailable", s.err)
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}

			requests.Store(0)
			goodFirst.Store(true)
			s = subscribe()
			if s.err != nil {
				t.Fatalf("Subscribe: %v", s.err)
			}
			defer s.cancel()
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				t.Fatal("the subscription did not reconnect within 10s of the end event")
			}
			time.Sleep(2 * time.Second) // reconnections pause 100ms, then 200ms, ...
			if n := requests.Load(); n != 2 {
				t.Fatalf("%d requests, want 2: the subscription reconnected after a malformed subscribed event %s", n, tc.data)
			}
		})
	}
}
