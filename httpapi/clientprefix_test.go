package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestClientUnderEscapedPrefixKeepsKeys: a Client whose base URL has a
// path prefix with a character that must be escaped (a space, as a proxy
// may mount the API under "/lease store") reads the key it names. The
// client builds the path from the prefix's unescaped form, so the whole
// path is escaped again from its decoded text, and the %2F of a namespace
// "we/ird" becomes a slash: the get of we/ird's key "sl/ash" read namespace
// "we", key "ird/sl/ash", another lease.
func TestClientUnderEscapedPrefixKeepsKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	const prefix = "/lease%20store"
	proxy := prefixProxy(t, s, prefix)

	ctx := t.Context()
	mine := protocol.Key{Namespace: "we/ird", Name: "sl/ash"}
	other := protocol.Key{Namespace: "we", Name: "ird/sl/ash"}
	for _, a := range []struct {
		key   protocol.Key
		owner string
	}{{mine, "mine"}, {other, "other"}} {
		if res, err := s.rt.Acquire(ctx, protocol.AcquireRequest{Key: a.key, Owner: a.owner, TTL: time.Minute}); err != nil {
			t.Fatalf("acquire %v: %v", a.key, err)
		} else if res.Status != protocol.StatusAcquired {
			t.Fatalf("acquire %v: %v", a.key, res.Status)
		}
	}
	// Through the proxy, the path LeasePath makes reads the right lease.
	raw := expect(t, "get through the proxy", send(t, "GET", proxy.URL+prefix+httpapi.LeasePath(mine), ""), 200, "found")
	if l := raw["lease"].(map[string]any); l["owner"] != "mine" {
		t.Fatalf("GET %s%s: lease %v, want owner mine", prefix, httpapi.LeasePath(mine), l)
	}

	c := newClient(t, proxy.URL+prefix, nil)
	res, err := c.Get(ctx, protocol.GetRequest{Key: mine})
	if err != nil {
		t.Fatalf("client get %v under prefix %s: %v", mine, prefix, err)
	}
	if res.Status != protocol.StatusFound || res.Lease == nil || res.Lease.Key != mine || res.Lease.Owner != "mine" {
		t.Fatalf("client with base URL %s: get %v answered %s with lease %+v; want found, the lease of owner mine at %v",
			proxy.URL+prefix, mine, res.Status, res.Lease, mine)
	}
	l, err := c.List(ctx, protocol.ListRequest{Namespace: mine.Namespace})
	if err != nil || l.Status != protocol.StatusFound || len(l.Leases) != 1 || l.Leases[0].Key != mine {
		t.Fatalf("client with base URL %s: list of namespace %q: %+v, %v; want the one lease at %v", proxy.URL+prefix, mine.Namespace, l, err, mine)
	}
}

// prefixProxy is a proxy in front of s that mounts its API under prefix
// (escaped, as sent on the wire): it strips the prefix as sent, keeping
// the rest's escapes, as the handler routes on the escaped path, and
// answers 502 naming the path of a request outside it.
func prefixProxy(t *testing.T, s *server, prefix string) *httptest.Server {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
		if !ok {
			http.Error(w, "proxy: no route for "+r.URL.EscapedPath(), http.StatusBadGateway)
			return
		}
		u := *r.URL
		u.RawPath = rest
		u.Path, _ = url.PathUnescape(rest)
		r2 := r.Clone(r.Context())
		r2.URL = &u
		s.h.ServeHTTP(w, r2)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// A Client reading one key refuses an answer about another (a proxy that
// rewrote the path, a server that decoded it another way): the caller
// would take another lease's holder and token for its key's, as the get
// behind a mis-escaped prefix did (TestClientUnderEscapedPrefixKeepsKeys).
func TestClientRefusesAnAnswerAboutAnotherKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	ctx := t.Context()
	asked, other := protocol.Key{Namespace: "ns", Name: "a"}, protocol.Key{Namespace: "ns", Name: "b"}
	if _, err := s.rt.Acquire(ctx, protocol.AcquireRequest{Key: other, Owner: "other", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		u := *r.URL
		u.Path = strings.Replace(u.Path, httpapi.LeasePath(asked), httpapi.LeasePath(other), 1)
		u.RawPath = ""
		r2.URL = &u
		s.h.ServeHTTP(w, r2)
	}))
	t.Cleanup(proxy.Close)
	c := newClient(t, proxy.URL, nil)
	res, err := c.Get(ctx, protocol.GetRequest{Key: asked})
	if err == nil || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "ns/b") {
		t.Fatalf("get %v through a proxy that asks for %v: %+v, %v; want unavailable naming the key the server answered about",
			asked, other, res, err)
	}
}
