package httpapi_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestClientPrefixKeepsItsEscapedSlashBesideARawCharacter: a base URL
// whose prefix holds an escaped slash (%2F, one segment) and a character
// written unescaped (an ö, as people type a tenant's name) reaches the API
// under that one segment, as the prefix was escaped; net/url drops the
// escaped form of such a path (RawPath is not a valid encoding of it), so
// the %2F must not become a slash.
func TestClientPrefixKeepsItsEscapedSlashBesideARawCharacter(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	const typed, sent = "/t%2Fstöre", "/t%2Fst%C3%B6re" // the prefix as typed, and as one segment on the wire
	proxy := prefixProxy(t, s, sent)
	ctx := t.Context()
	k := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := s.rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "mine", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, proxy.URL+typed, nil)
	res, err := c.Get(ctx, protocol.GetRequest{Key: k})
	if err != nil || res.Lease == nil || res.Lease.Owner != "mine" {
		t.Fatalf("client with base URL %s: get %v: %+v, %v; want found, the lease of owner mine (sent under %s)",
			proxy.URL+typed, k, res, err, sent)
	}
}
