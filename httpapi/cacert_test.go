package httpapi_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/testca"
	"github.com/leasestore/leasestore/protocol"
)

// An https base URL (leasectl's DSN) names the CA to trust for a server
// whose certificate a private CA signed in ?cacert=FILE, as an etcds://
// DSN does: without it the certificate is not trusted; with it the
// operations and the notify stream go over HTTP/2, as with the client's
// own transport; with another CA's certificate it is not trusted again
// (the file's CAs are the ones trusted, as etcdctl's --cacert).
func TestClientTrustsThePrivateCAOfItsCacertParameter(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	key := protocol.Key{Namespace: "billing", Name: "invoice-run"}
	acquire := func(c *httpapi.Client) (protocol.Result, error) {
		store := protocol.New(c, nil)
		t.Cleanup(func() { _ = store.Close(context.Background()) })
		return store.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: time.Hour})
	}

	without, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(without); protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("acquire over https without cacert: %v, want unavailable, the certificate not trusted", err)
	}

	c, err := httpapi.NewClient(s.url+"?cacert="+url.QueryEscape(s.caFile), nil)
	if err != nil {
		t.Fatalf("NewClient with ?cacert=%s: %v", s.caFile, err)
	}
	res, err := acquire(c)
	if err != nil {
		t.Fatalf("acquire over https with ?cacert= naming the private CA: %v", err)
	}
	ch, cancel, err := c.Subscribe(t.Context(), key)
	if err != nil {
		t.Fatalf("subscribe over https with ?cacert=: %v", err)
	}
	defer cancel()
	if _, err := c.Release(t.Context(), protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: res.Lease.Token, RequestID: "rel-1"}); err != nil {
		t.Fatal(err)
	}
	signalled(t, ch, "the release")
	if s.http2.Load() == 0 {
		t.Error("no request came over HTTP/2 with ?cacert=")
	}

	other := testca.New(t, "other")
	wrong, err := httpapi.NewClient(s.url+"/?cacert="+url.QueryEscape(other.CertFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(wrong); protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("acquire over https with ?cacert= naming another CA: %v, want unavailable, the certificate not trusted", err)
	}
}

// A cacert parameter that cannot serve is refused by NewClient, naming
// the parameter and why, before anything is sent (no TLS handshake
// begins): a file that cannot be read or holds no PEM certificate, an
// empty or repeated one, one on http://, one beside a ClientConfig.HTTPClient
// (whose transport the client borrows and cannot change), and any other
// parameter.
func TestClientRefusesABadCacertParameter(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyOnly := filepath.Join(dir, "key.pem")
	_, keyFile := testca.New(t, "keys").Server(t)
	if b, err := os.ReadFile(keyFile); err != nil || os.WriteFile(keyOnly, b, 0o600) != nil {
		t.Fatalf("write a key file: %v", err)
	}
	plain := strings.Replace(s.url, "https://", "http://", 1)
	q := url.QueryEscape
	for _, tc := range []struct {
		name string
		url  string
		cfg  *httpapi.ClientConfig
		says []string
	}{
		{"a file that does not exist", s.url + "?cacert=" + q(filepath.Join(dir, "none.pem")), nil, []string{"cacert", "none.pem", "no such file"}},
		{"a directory", s.url + "?cacert=" + q(dir), nil, []string{"cacert", dir}},
		{"a file without PEM", s.url + "?cacert=" + q(notPEM), nil, []string{"cacert", "not.pem", "no PEM certificate"}},
		{"a key, not a certificate", s.url + "?cacert=" + q(keyOnly), nil, []string{"cacert", "key.pem", "no PEM certificate"}},
		{"an empty value", s.url + "?cacert=", nil, []string{"cacert", "empty"}},
		{"given twice", s.url + "?cacert=" + q(s.caFile) + "&cacert=" + q(s.caFile), nil, []string{"cacert", "twice"}},
		{"on http://", plain + "?cacert=" + q(s.caFile), nil, []string{"cacert", "https://"}},
		{"beside an HTTPClient", s.url + "?cacert=" + q(s.caFile), &httpapi.ClientConfig{HTTPClient: privateCAClient(t, s.caFile)},
			[]string{"cacert", "HTTPClient"}},
		{"another parameter", s.url + "?cacert=" + q(s.caFile) + "&insecure=1", nil, []string{`"insecure"`, "cacert"}},
		{"a malformed query", s.url + "?cacert=%zz", nil, []string{"cacert"}},
	} {
		c, err := httpapi.NewClient(tc.url, tc.cfg)
		if err == nil {
			_ = c.Close(context.Background())
			t.Errorf("%s: NewClient(%q) took it", tc.name, tc.url)
			continue
		}
		for _, want := range tc.says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not say %q: %v", tc.name, want, err)
			}
		}
	}
	if n := s.hellos.Load(); n != 0 {
		t.Errorf("%d TLS handshakes began for base URLs NewClient refused; want none", n)
	}
}
