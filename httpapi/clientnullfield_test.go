package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestClientRefusesANullRequiredField: the OpenAPI document gives a
// lease's token (an integer) and owner (a string) as required and not
// nullable: only acquired_at, renewed_at, expires_at and a result's lease
// may be null. A server (on a loopback port) whose acquire answer carries
// "token": null or "owner": null is of another protocol, as one that
// leaves the member out is: json.Unmarshal leaves the field zero, a
// fencing token 0 or an empty owner the caller takes for the server's.
// The client refuses the answer without the member (unavailable); it must
// refuse the one with the member null too, not hand the caller a lease of
// token 0.
func TestClientRefusesANullRequiredField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, lease string }{
		{"token null", `{"namespace":"scan","key":"k","owner":"w","token":null,"acquired_at":"2030-01-02T03:04:05.000000Z",` +
			`"renewed_at":"2030-01-02T03:04:05.000000Z","expires_at":"2030-01-02T03:05:05.000000Z","version":1}`},
		{"owner null", `{"namespace":"scan","key":"k","owner":null,"token":7,"acquired_at":"2030-01-02T03:04:05.000000Z",` +
			`"renewed_at":"2030-01-02T03:04:05.000000Z","expires_at":"2030-01-02T03:05:05.000000Z","version":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := `{"status":"acquired","replayed":false,"request_id":"r","message":"","lease":` + c.lease + `}`
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			cl, err := httpapi.NewClient(srv.URL, &httpapi.ClientConfig{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close(context.Background())
			res, err := cl.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "scan", Name: "k"},
				Owner: "w", TTL: time.Minute, RequestID: "r"})
			if protocol.StatusOf(err) != protocol.StatusUnavailable {
				var l protocol.Lease
				if res.Lease != nil {
					l = *res.Lease
				}
				t.Errorf("acquire answered %s: status %q, token %d, owner %q, error %v; want unavailable: the answer "+
					"does not have the shape the OpenAPI document gives", body, res.Status, l.Token, l.Owner, err)
			}
		})
	}
}
