package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// An https:// DSN names the private CA that signed a served store's
// certificate in ?cacert=FILE: leasectl serve presents a certificate of a
// CA no system trusts; leasectl without cacert (and without SSL_CERT_FILE)
// exits 5, the certificate not trusted, naming cacert; with it, acquire,
// get and release work; the DSN's cacert shows in messages as given.
func TestServedStoreWithCacert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "dsn-cacert")
	cert, key := ca.Server(t)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "tls.db"), nil,
		"--tls-cert", cert, "--tls-key", key, "--tokens", writeTokens(t, dir, e2eTokens))
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("url %s", s.url)
	}
	as := func(dsn string, args ...string) run {
		t.Helper()
		cmd := leasectl{dir: dir, dsn: dsn}.command(t.Context(), append(args, "-n", "e2e", "-o", "json")...)
		cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+e2eWriter, "SSL_CERT_FILE="+filepath.Join(dir, "no-such-bundle.pem"))
		return finish(t, cmd, cmd.Args, cmd.Run())
	}
	if r := as(s.url, "acquire", "ca-key", "--owner", "w"); r.code != 5 || !strings.Contains(r.stdout, "TLS certificate is not trusted") ||
		!strings.Contains(r.stdout, "cacert") {
		t.Fatalf("acquire over https without cacert: want exit 5, the certificate not trusted, naming cacert:\n%s", r)
	}
	dsn := s.url + "?cacert=" + url.QueryEscape(ca.CertFile)
	r := as(dsn, "acquire", "ca-key", "--owner", "w")
	if r.code != 0 {
		t.Fatalf("acquire over https with ?cacert=:\n%s", r)
	}
	tok := result(t, r.obj(t), "acquired")["token"]
	if r := as(dsn, "get", "ca-key"); r.code != 0 || result(t, r.obj(t), "found")["token"] != tok {
		t.Fatalf("get over https with ?cacert=:\n%s", r)
	}
	if r := as(dsn, "release", "ca-key", "--owner", "w", "--token", strconv.FormatInt(int64(tok.(float64)), 10)); r.code != 0 {
		t.Fatalf("release over https with ?cacert=:\n%s", r)
	}
}

// A cacert that cannot serve (no file, a directory, a file without a PEM
// certificate, an empty value, one on http://) is invalid input: exit 2,
// status invalid, the message naming the cacert parameter, and nothing is
// sent: the DSN's port, a real listener, takes no connection.
func TestBadCacertSendsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, accepted := countingListener(t)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "https://" + ln.Addr().String()
	for _, tc := range []struct {
		dsn  string
		says string
	}{
		{base + "?cacert=" + url.QueryEscape(filepath.Join(dir, "none.pem")), "none.pem"},
		{base + "?cacert=" + url.QueryEscape(dir), dir},
		{base + "?cacert=" + url.QueryEscape(notPEM), "no PEM certificate"},
		{base + "?cacert=", "empty"},
		{"http://" + ln.Addr().String() + "?cacert=" + url.QueryEscape(notPEM), "https://"},
	} {
		cmd := leasectl{dir: dir, dsn: tc.dsn}.command(t.Context(), "acquire", "k", "-n", "e2e", "--owner", "w", "-o", "json")
		cmd.Env = append(cmd.Env, "LEASESTORE_API_TOKEN="+e2eWriter)
		r := finish(t, cmd, cmd.Args, cmd.Run())
		if r.code != 2 || r.obj(t)["status"] != "invalid" || !strings.Contains(r.stdout, "cacert") || !strings.Contains(r.stdout, tc.says) {
			t.Errorf("DSN %s: want exit 2, status invalid, naming cacert and %q:\n%s", tc.dsn, tc.says, r)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the DSNs' port took %d connections; a bad cacert must send nothing", n)
	}
}
