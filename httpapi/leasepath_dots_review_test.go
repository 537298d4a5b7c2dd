package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// LeasePath and NotifyPath give the path of a key for any HTTP client
// (docs/http-api.md: the API is for other languages, and every key any
// surface prints is accepted back). A key whose namespace or name is "."
// or ".." (valid keys) got those as literal path segments, which a client
// that resolves a reference as RFC 3986 says (curl, browsers, Go's
// url.URL.ResolveReference, urljoin) removes as dot segments: curl's GET
// of namespace "." key "x" reached GET /v1/leases/x, a list of namespace
// "x" answering found; of namespace ".." key "x", GET /v1/x (no route).
// The server reads %2E%2E as "..", so the paths can say it unharmed.
func TestLeasePathsSurviveDotSegmentRemoval(t *testing.T) {
	base, err := url.Parse("http://127.0.0.1:7070/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []protocol.Key{
		{Namespace: "..", Name: "x"}, {Namespace: ".", Name: "x"},
		{Namespace: "a", Name: ".."}, {Namespace: "a", Name: "."},
	} {
		for name, path := range map[string]string{"LeasePath": httpapi.LeasePath(k), "NotifyPath": httpapi.NotifyPath(k)} {
			ref, err := url.Parse(path)
			if err != nil {
				t.Fatalf("%s(%s) = %q: %v", name, k, path, err)
			}
			if got := base.ResolveReference(ref).EscapedPath(); got != path {
				t.Errorf("%s(%s) = %q, which an RFC 3986 client (curl, url.URL.ResolveReference) requests as %q: another route or key",
					name, k, path, got)
			}
		}
	}
}

// TestDotSegmentKeysRoundTrip: the escaped paths LeasePath and the
// Client's list build for a "." or ".." part reach, over a real port, the
// lease (or namespace) they name: the server reads %2E and %2E%2E back as
// "." and "..".
func TestDotSegmentKeysRoundTrip(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	rt := newClient(t, s.url, nil)
	ctx := context.Background()
	for _, k := range []protocol.Key{
		{Namespace: "..", Name: "x"}, {Namespace: ".", Name: "x"},
		{Namespace: "a", Name: ".."}, {Namespace: "a", Name: "."},
	} {
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o-" + k.String(), TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire %s: %v", k, err)
		}
		got, err := rt.Get(ctx, protocol.GetRequest{Key: k})
		if err != nil || got.Status != protocol.StatusFound || got.Lease.Key != k || got.Lease.Token != res.Lease.Token {
			t.Errorf("get %s over %s: %+v, %v; want the lease just acquired (token %d)", k, httpapi.LeasePath(k), got, err, res.Lease.Token)
		}
		code, body := rawGet(t, s.url, httpapi.LeasePath(k))
		if code != http.StatusOK || !strings.Contains(body, `"owner":"o-`+k.String()+`"`) {
			t.Errorf("raw GET %s: %d %s; want 200 with owner o-%s", httpapi.LeasePath(k), code, body, k)
		}
	}
	for _, ns := range []string{".", ".."} {
		page, err := rt.List(ctx, protocol.ListRequest{Namespace: ns})
		if err != nil || len(page.Leases) != 1 || page.Leases[0].Key != (protocol.Key{Namespace: ns, Name: "x"}) {
			t.Errorf("list of namespace %q: %+v, %v; want its one lease, key x", ns, page, err)
		}
	}
}
