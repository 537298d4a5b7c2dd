package httpapi_test

import (
	"net/url"
	"testing"

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
