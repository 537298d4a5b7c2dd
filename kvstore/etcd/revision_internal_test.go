package etcd

import (
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRevisionGuardOrdersByWhatPrecededTheCall: answers to concurrent
// calls arrive in any order, so an answer is compared only with the
// revisions answered before its call was sent (a guard comparing with
// everything seen so far raised a false alarm on the second answer
// below); a revision below one answered before the call went out is the
// cluster going back, and every call after it is refused.
func TestRevisionGuardOrdersByWhatPrecededTheCall(t *testing.T) {
	var g revisionGuard
	h := func(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }
	if err := g.observe(0, h(10)); err != nil {
		t.Fatal(err)
	}
	a, _ := g.begin()
	b, _ := g.begin()
	if err := g.observe(a, h(12)); err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := g.observe(b, h(11)); err != nil { // read before a's write committed
		t.Fatalf("b, sent before a's answer came: %v", err)
	}
	if err := g.observe(b, nil); err != nil {
		t.Fatalf("an answer without a header: %v", err)
	}
	c, _ := g.begin()
	var back *errRevisionBack
	if err := g.observe(c, h(3)); !errors.As(err, &back) || back.was != 12 || back.now != 3 {
		t.Fatalf("c, below an answer received before it was sent: %v; want the revision gone back from 12 to 3", err)
	}
	if _, err := g.begin(); !errors.As(err, &back) {
		t.Fatalf("a call after the revision went back: %v; want it refused", err)
	}
	if err := g.observe(c, h(13)); !errors.As(err, &back) {
		t.Fatalf("an answer after the revision went back: %v; want it refused", err)
	}
}
