package backendkit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// A valid request passes the checks a backend runs at its entry points
// without an allocation: the checks cost every operation.
func TestRefuseValidRequestsAllocateNothing(t *testing.T) {
	k := protocol.Key{Namespace: "ns", Name: "k"}
	acq := protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: "r1", LockDelay: time.Second}
	ren := protocol.RenewRequest{Key: k, Owner: "o", Token: 7, TTL: time.Minute, RequestID: "r2"}
	rel := protocol.ReleaseRequest{Key: k, Owner: "o", Token: 7, RequestID: "r3"}
	rev := protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "r", RequestID: "r4"}
	get := protocol.GetRequest{Key: k}
	list := protocol.ListRequest{Namespace: "ns", Prefix: "k", Limit: 10}
	for name, f := range map[string]func() error{
		"acquire": func() error { _, err := backendkit.RefuseAcquire(acq); return err },
		"renew":   func() error { _, err := backendkit.RefuseRenew(ren); return err },
		"release": func() error { _, err := backendkit.RefuseRelease(rel); return err },
		"revoke":  func() error { _, err := backendkit.RefuseRevoke(rev); return err },
		"get":     func() error { _, err := backendkit.RefuseGet(get); return err },
		"list":    func() error { _, err := backendkit.RefuseList(list); return err },
	} {
		if err := f(); err != nil {
			t.Fatalf("%s of a valid request: %v", name, err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = f() }); n != 0 {
			t.Errorf("%s of a valid request: %v allocations, want 0", name, n)
		}
	}
}

// RenewMany sends the valid requests, in order, and answers the others
// invalid in place; with none valid it sends nothing.
func TestRenewManySendsOnlyValidRequests(t *testing.T) {
	k := protocol.Key{Namespace: "ns", Name: "k"}
	ok := protocol.RenewRequest{Key: k, Owner: "o", Token: 7, RequestID: "r1"}
	bad := ok
	bad.Token = 0
	noID := ok
	noID.RequestID = ""
	var sent [][]protocol.RenewRequest
	renew := func(reqs []protocol.RenewRequest) ([]protocol.Result, error) {
		sent = append(sent, reqs)
		out := make([]protocol.Result, len(reqs))
		for i := range out {
			out[i] = protocol.Result{Status: protocol.StatusRenewed, RequestID: reqs[i].RequestID}
		}
		return out, nil
	}
	ok2 := ok
	ok2.RequestID = "r2"
	got, err := backendkit.RenewMany([]protocol.RenewRequest{ok, bad, noID, ok2}, renew)
	if err != nil || len(got) != 4 {
		t.Fatalf("RenewMany: %d results, %v", len(got), err)
	}
	if len(sent) != 1 || len(sent[0]) != 2 || sent[0][0] != ok || sent[0][1] != ok2 {
		t.Fatalf("RenewMany sent %+v, want the two valid requests in order", sent)
	}
	if got[0].Status != protocol.StatusRenewed || got[0].RequestID != "r1" || got[3].Status != protocol.StatusRenewed || got[3].RequestID != "r2" {
		t.Errorf("RenewMany: the valid requests' results %+v and %+v, want renewed in place", got[0], got[3])
	}
	for _, i := range []int{1, 2} {
		r := got[i]
		if r.Status != protocol.StatusInvalid || r.Op != protocol.OpRenew || r.Key != k || !errors.Is(r.Err(), protocol.ErrInvalid) {
			t.Errorf("RenewMany: result %d %+v, want invalid", i, r)
		}
	}
	sent = nil
	if got, err := backendkit.RenewMany([]protocol.RenewRequest{bad, noID}, renew); err != nil || len(got) != 2 || len(sent) != 0 {
		t.Errorf("RenewMany of invalid requests only: %+v, %v, sent %+v; want two invalid results and nothing sent", got, err, sent)
	}
	if _, err := backendkit.RenewMany(make([]protocol.RenewRequest, protocol.MaxRenewMany+1), renew); !errors.Is(err, protocol.ErrInvalid) || len(sent) != 0 {
		t.Errorf("RenewMany of %d requests: %v, sent %d calls; want invalid and nothing sent", protocol.MaxRenewMany+1, err, len(sent))
	}
}

// BenchmarkRefuseAcquire is the cost the check adds to every acquire.
func BenchmarkRefuseAcquire(b *testing.B) {
	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "billing", Name: "invoice-run-2026-12"}, Owner: "worker-17@host-3",
		TTL: 30 * time.Second, RequestID: "0193a5b2c4d5e6f708192a3b4c5d6e7f"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := backendkit.RefuseAcquire(req); err != nil {
			b.Fatal(err)
		}
	}
}
