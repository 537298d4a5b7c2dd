package postgres_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// RenewMany while the server cannot be reached answers no renewal: the
// runtime's error says so (protocol.Runtime.RenewMany: "the error is nil
// when the store answered; when it could not ... the error is the *Error
// of the first"; protocol.BulkRenewer returns an error only when it could
// not answer at all, as etcd's does when every renewal failed), so that a
// caller that checks the error alone does not take the call for answered.
func TestRenewManyWithTheServerUnreachableFails(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	k := keysIn(ns)
	b, link, _ := behindPartition(t, dsn, nil)
	rt := protocol.New(b, nil)
	t.Cleanup(func() { link.heal(); _ = rt.Close(ctxT(t)) })
	var reqs []protocol.RenewRequest
	for i := range 3 {
		res, err := rt.Acquire(ctxT(t), protocol.AcquireRequest{Key: k(fmt.Sprintf("k%d", i)), Owner: "w", TTL: time.Hour})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		reqs = append(reqs, protocol.RenewRequest{Key: res.Lease.Key, Owner: "w", Token: res.Lease.Token, TTL: time.Hour})
	}
	link.cut()
	results, err := rt.RenewMany(ctxT(t), reqs)
	for i, r := range results {
		if r.Status != protocol.StatusUnavailable {
			t.Fatalf("renewal %d with the server unreachable: %s (%s), want unavailable", i, r.Status, r.Message)
		}
	}
	if err == nil {
		t.Fatalf("renew many with the server unreachable: no error, though no renewal was answered (%s: %s)",
			results[0].Status, results[0].Message)
	}
	wantErrStatus(t, "renew many with the server unreachable", err, protocol.StatusUnavailable)
}

// The same over HTTP: POST /v1/renew-many while the served store's server
// cannot be reached answers no renewal, so the request as a whole failed,
// and DESIGN.md's HTTP codes say how: 503 for unavailable, the body's
// status unavailable, each renewal's result unavailable too. It answered
// 200 "found", as if the store had answered.
func TestRenewManyWithTheServerUnreachableOverHTTP(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	b, link, _ := behindPartition(t, dsn, nil)
	t.Cleanup(link.heal)
	url := serveHTTP(t, b, false, nil)
	var renewals []string
	for i := range 3 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: fmt.Sprintf("k%d", i)},
			Owner: "w", TTL: time.Hour, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		renewals = append(renewals, fmt.Sprintf(`{"namespace":%q,"key":%q,"owner":"w","token":%d,"ttl":"1h"}`,
			ns, res.Lease.Key.Name, res.Lease.Token))
	}
	link.cut()
	resp, err := http.Post(url+"/v1/renew-many", "application/json",
		strings.NewReader(`{"renewals":[`+strings.Join(renewals, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Results []struct {
			Status string `json:"status"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatalf("renew many over HTTP: %d, body: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || page.Status != string(protocol.StatusUnavailable) {
		t.Fatalf("renew many over HTTP with the server unreachable: %d %q (%s), want 503 unavailable",
			resp.StatusCode, page.Status, page.Message)
	}
	if len(page.Results) != len(renewals) {
		t.Fatalf("%d results for %d renewals", len(page.Results), len(renewals))
	}
	for i, r := range page.Results {
		if r.Status != string(protocol.StatusUnavailable) {
			t.Fatalf("renewal %d over HTTP with the server unreachable: %s, want unavailable", i, r.Status)
		}
	}
}
