package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/testca"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// TestTLS runs a one-member cluster of its own that serves clients over
// TLS and requires client certificates signed by its CA, and opens stores
// on it from DSNs as etcdctl users write them. The right files serve
// leases; every wrong setting, with or without a user, fails soon after
// the DSN's dial-timeout (Open once hung forever on an untrusted server:
// the client retried the handshake under an unbounded context), as
// unavailable, with a message naming the DSN parameter that fixes it; a
// caller's deadline shorter than the dial-timeout wins, as timeout.
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ca := testca.New(t, "cluster")
	serverCert, serverKey := ca.Server(t)
	clientCert, clientKey := ca.Client(t, "worker")
	other := testca.New(t, "other")
	otherCert, otherKey := other.Client(t, "stranger")

	c, err := etcdcluster.Start(ctx, &etcdcluster.Options{Members: 1, TLS: &etcdcluster.TLSFiles{
		CertFile: serverCert, KeyFile: serverKey, ClientCA: ca.CertFile,
		CAFile: ca.CertFile, ClientCert: clientCert, ClientKey: clientKey,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop) // after the parallel subtests
	host := strings.TrimPrefix(c.Members[0].ClientURL, "https://")
	plainHost := strings.TrimPrefix(etcdcluster.Shared(t).Members[0].ClientURL, "http://")
	unused := freeAddr(t)

	works := func(t *testing.T, dsn string) {
		cfg, err := etcd.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		b, err := etcd.Open(ctx, cfg)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		rt := protocol.New(b, nil)
		defer rt.Close(context.Background())
		res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire over TLS: %v", err)
		}
		if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: res.Lease.Key, Owner: "o", Token: res.Lease.Token}); err != nil {
			t.Fatalf("release over TLS: %v", err)
		}
	}
	t.Run("trusted", func(t *testing.T) {
		works(t, c.DSN("tls-trusted"))
	})
	t.Run("skip_verify", func(t *testing.T) {
		works(t, fmt.Sprintf("etcds://%s/tls-skip?insecure-skip-tls-verify=true&cert=%s&key=%s", host, clientCert, clientKey))
	})
	t.Run("cacert_implies_tls", func(t *testing.T) {
		works(t, fmt.Sprintf("etcd://%s/tls-implied?cacert=%s&cert=%s&key=%s", host, ca.CertFile, clientCert, clientKey))
	})

	for _, tc := range []struct {
		name, dsn string
		want      []string // each must be in the error
	}{
		{"untrusted_server", fmt.Sprintf("etcds://%s/tls?cacert=%s&cert=%s&key=%s&dial-timeout=2s", host, other.CertFile, clientCert, clientKey),
			[]string{"certificate", "cacert="}},
		// With a user, the client authenticates while it connects (a
		// deadline error of its own once reported as a bare timeout).
		// The member has no auth enabled: the client cannot tell.
		{"auth_untrusted_server", fmt.Sprintf("etcds://root:pw@%s/tls?cacert=%s&cert=%s&key=%s&dial-timeout=2s", host, other.CertFile, clientCert, clientKey),
			[]string{"certificate", "cacert="}},
		{"no_client_certificate", fmt.Sprintf("etcds://%s/tls?cacert=%s&dial-timeout=2s", host, ca.CertFile),
			[]string{"client certificate", "cert=", "key="}},
		{"client_certificate_of_another_ca", fmt.Sprintf("etcds://%s/tls?cacert=%s&cert=%s&key=%s&dial-timeout=2s", host, ca.CertFile, otherCert, otherKey),
			[]string{"client certificate", "cert="}},
		{"plain_text_to_tls", fmt.Sprintf("etcd://%s/tls?dial-timeout=2s", host),
			[]string{"etcds://"}},
		{"tls_to_plain_text", fmt.Sprintf("etcds://%s/tls?cacert=%s&dial-timeout=2s", plainHost, ca.CertFile),
			[]string{"plain text", "etcd://"}},
		{"nothing_listening", fmt.Sprintf("etcd://%s/tls?dial-timeout=2s", unused),
			[]string{"dial-timeout", unused}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := etcd.ParseDSN(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			// The caller's context is longer than the dial timeout: Open
			// must give up on its own.
			took, err := refusedWithin(t, cfg, time.Minute)
			if !errors.Is(err, protocol.ErrUnavailable) {
				t.Errorf("open: %v, want unavailable", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("open: %v, want the message to name %q", err, w)
				}
			}
			// dial-timeout=2s; a loaded machine gets generous slack, a
			// hang does not.
			if took > 15*time.Second {
				t.Errorf("open took %v with dial-timeout=2s", took)
			}
		})
	}

	// Without a dial-timeout in the DSN, a caller's deadline shorter than
	// the default leaves a third of its time to connecting, so that the
	// probe's findings still fit before it: leasectl's --timeout (5s) equals the
	// default dial-timeout, and a wrong TLS setting used to answer a bare
	// timeout there.
	t.Run("untrusted_server_caller_deadline", func(t *testing.T) {
		t.Parallel()
		cfg, err := etcd.ParseDSN(fmt.Sprintf("etcds://%s/tls?cacert=%s&cert=%s&key=%s", host, other.CertFile, clientCert, clientKey))
		if err != nil {
			t.Fatal(err)
		}
		const callerAfter = 3 * time.Second
		took, err := refusedWithin(t, cfg, callerAfter)
		if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "cacert=") {
			t.Errorf("open: %v, want unavailable naming cacert=", err)
		}
		if took > callerAfter+time.Second {
			t.Errorf("open took %v with a caller's deadline of %v", took, callerAfter)
		}
	})

	// An endpoint that accepts connections and never answers is the
	// slowest to diagnose: the probe waits as long as the dial timeout
	// did. The findings must still come before the caller's deadline
	// (with half the time for the dial timeout they came at the very
	// deadline and lost the race in 4 of 8 runs).
	t.Run("silent_endpoint_caller_deadline", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close() // held open, never answered
			}
		}()
		for _, scheme := range []string{"etcd", "etcds"} {
			cfg, err := etcd.ParseDSN(fmt.Sprintf("%s://%s/tls", scheme, ln.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			const callerAfter = 3 * time.Second
			took, err := refusedWithin(t, cfg, callerAfter)
			if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), ln.Addr().String()+":") {
				t.Errorf("%s: open: %v, want unavailable with the endpoint's finding", scheme, err)
			}
			if took > callerAfter+time.Second {
				t.Errorf("%s: open took %v with a caller's deadline of %v", scheme, took, callerAfter)
			}
		}
	})

	// The caller's deadline bounds Open also while the client
	// authenticates (which clientv3.New does under the dial timeout only:
	// Open used to return after the whole dial-timeout).
	t.Run("auth_caller_deadline", func(t *testing.T) {
		t.Parallel()
		cfg, err := etcd.ParseDSN(fmt.Sprintf("etcds://root:pw@%s/tls?cacert=%s&cert=%s&key=%s&dial-timeout=5s", host, other.CertFile, clientCert, clientKey))
		if err != nil {
			t.Fatal(err)
		}
		const callerAfter = 500 * time.Millisecond
		took, err := refusedWithin(t, cfg, callerAfter)
		if !errors.Is(err, protocol.ErrTimeout) {
			t.Errorf("open: %v, want timeout", err)
		}
		if took > callerAfter+time.Second {
			t.Errorf("open took %v with a caller's deadline of %v (dial-timeout=5s)", took, callerAfter)
		}
	})
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
