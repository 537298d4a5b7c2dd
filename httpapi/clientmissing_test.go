package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestClientRefusesAnAnswerWithoutAField: a server (on a loopback port)
// whose answer lacks a field its shape requires (a lease without its
// token or owner, a result without its lease, a page's lease or record
// without a field, a renewal's result without replayed) is of another
// protocol: json.Unmarshal would leave the field zero, a fencing token 0
// or an empty owner the caller would take for the server's. The client
// answers unavailable naming the field, as the Python client does. A field
// the shape does not have (a newer server's) is ignored, and an optional
// one (lock_delay, a record's expires_at) may be absent.
func TestClientRefusesAnAnswerWithoutAField(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var code int
	var answer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	c, err := httpapi.NewClient(srv.URL, &httpapi.ClientConfig{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	const lease = `{"namespace":"scan","key":"k","owner":"w","token":7,"acquired_at":"2030-01-02T03:04:05.000000Z",` +
		`"renewed_at":"2030-01-02T03:04:05.000000Z","expires_at":"2030-01-02T03:05:05.000000Z","version":1}`
	const record = `{"id":7,"at":"2030-01-02T03:04:05.000000Z","op":"acquire","namespace":"scan","key":"k","owner":"w",` +
		`"token":7,"request_id":"r","actor":"","reason":"","status":"acquired","version":1}`
	result := func(status, l string) string {
		return `{"status":"` + status + `","replayed":false,"request_id":"r","message":"","lease":` + l + `}`
	}
	// without returns the JSON object obj without its member (whose value
	// holds no comma outside brackets).
	without := func(obj, member string) string {
		t.Helper()
		i := strings.Index(obj, `"`+member+`":`)
		if i < 0 {
			t.Fatalf("%s has no member %s", obj, member)
		}
		j, depth := i, 0
		for ; j < len(obj); j++ {
			if c := obj[j]; c == '{' || c == '[' {
				depth++
			} else if c == '}' || c == ']' {
				depth--
			}
			if depth < 0 || depth == 0 && obj[j] == ',' {
				break
			}
		}
		if obj[j] == ',' {
			return obj[:i] + obj[j+1:]
		}
		return strings.TrimSuffix(obj[:i], ",") + obj[j:]
	}
	key := protocol.Key{Namespace: "scan", Name: "k"}
	ops := map[string]func(ctx context.Context) error{
		"acquire": func(ctx context.Context) error {
			_, err := c.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute, RequestID: "r"})
			return err
		},
		"get": func(ctx context.Context) error {
			_, err := c.Get(ctx, protocol.GetRequest{Key: key})
			return err
		},
		"list": func(ctx context.Context) error {
			_, err := c.List(ctx, protocol.ListRequest{Namespace: "scan"})
			return err
		},
		"renew-many": func(ctx context.Context) error {
			_, err := c.RenewMany(ctx, []protocol.RenewRequest{{Key: key, Owner: "w", Token: 7, RequestID: "r"}})
			return err
		},
		"audit": func(ctx context.Context) error {
			_, err := c.ReadAudit(ctx, audit.Query{Namespace: "scan"})
			return err
		},
	}
	for _, tc := range []struct {
		name, op string
		code     int
		answer   string
		field    string // "" for an answer that reads
	}{
		{"a lease without token", "acquire", 200, result("acquired", without(lease, "token")), `"token"`},
		{"a lease without owner", "get", 200, result("found", without(lease, "owner")), `"owner"`},
		{"a lease without version", "get", 200, result("found", without(lease, "version")), `"version"`},
		{"a holder without expires_at", "acquire", 409, result("conflict", without(lease, "expires_at")), `"expires_at"`},
		{"a result without lease", "get", 200, without(result("found", lease), "lease"), `"lease"`},
		{"a result without replayed", "acquire", 200, without(result("acquired", lease), "replayed"), `"replayed"`},
		{"a page's lease without key", "list", 200, `{"status":"found","leases":[` + lease + `,` + without(lease, "key") + `],"next_cursor":""}`, `"key"`},
		{"a page without next_cursor", "list", 200, `{"status":"found","leases":[]}`, `"next_cursor"`},
		{"a renewal's result without its lease's token", "renew-many", 200,
			`{"status":"found","results":[` + result("renewed", without(lease, "token")) + `]}`, `"token"`},
		{"a record without actor", "audit", 200, `{"status":"found","records":[` + without(record, "actor") + `],"next_cursor":""}`, `"actor"`},
		{"a record without token", "audit", 200, `{"status":"found","records":[` + without(record, "token") + `],"next_cursor":""}`, `"token"`},
		// What reads.
		{"a lease with a field of a newer server", "acquire", 200,
			result("acquired", strings.Replace(lease, `"version":1`, `"version":1,"colour":"blue"`, 1)), ""},
		{"a lease with a lock-delay", "get", 200, result("found", strings.Replace(lease, `"version":1`, `"version":1,"lock_delay":"15s"`, 1)), ""},
		{"a null lease", "get", 404, result("not_found", "null"), ""},
		{"a record without expires_at, with a field of a newer server", "audit", 200,
			`{"status":"found","records":[` + strings.Replace(record, `"version":1`, `"version":1,"colour":"blue"`, 1) + `],"next_cursor":""}`, ""},
	} {
		mu.Lock()
		code, answer = tc.code, tc.answer
		mu.Unlock()
		err := ops[tc.op](t.Context())
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %s: %v, want it read", tc.name, tc.op, err)
			}
			continue
		}
		if protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %s: %v; want unavailable naming %s", tc.name, tc.op, err, tc.field)
		}
	}
}
